import type { Logger } from '@nestjs/common';
import { OutboxWalUnavailableError } from '../errors';
import type { OutboxDatabase } from './outbox-database';
import type { PostgresOutboxDialect } from './postgres/postgres.dialect';
import type { WalRelayHost } from './postgres/wal/wal-batch';
import { loadClient, PostgresWalReader, type WalReaderSettings } from './postgres/wal/wal-reader';
import { prepareWal, slotLag } from './postgres/wal/wal-setup';

export type { WalPublishOutcome, WalRelayHost } from './postgres/wal/wal-batch';

/** A relay that streams new rows from the database's log instead of polling for them (PostgreSQL WAL modes). */
export interface OutboxStreamRelay {
  /** The slot (and publication) it reads. */
  readonly slot: string;
  /** True while this process holds the slot and streams. */
  readonly streaming: boolean;
  /** Starts competing for the slot (in the background). */
  start(host: WalRelayHost, logger: Logger): void;
  /** Stops streaming, after the batch in hand is done. */
  stop(): Promise<void>;
  /** The slot's lag in bytes (unconfirmed, and WAL retained for it); `undefined` when it is gone. */
  lag(): Promise<{ lagBytes: number; retainedBytes: number; active: boolean } | undefined>;
}

/**
 * Checks that the outbox's database can stream (PostgreSQL with `wal_level = logical`, a role with REPLICATION, the
 * client package installed), makes the publication and slot when missing, and returns its stream relay. Throws
 * `OutboxWalUnavailableError` saying why not.
 */
export async function resolveStreamRelay(
  database: OutboxDatabase,
  settings: Omit<WalReaderSettings, 'slot' | 'table'>,
): Promise<{ relay: OutboxStreamRelay; created: boolean }> {
  if (database.dialect.name !== 'postgres') {
    throw new OutboxWalUnavailableError(
      `publisher.mode 'wal' needs PostgreSQL; the outbox of the DataSource '${database.name}' is on ` +
        `${database.dialect.name}. Use publisher.mode 'poll' there.`,
    );
  }
  try {
    loadClient();
  } catch {
    throw new OutboxWalUnavailableError(
      "publisher.mode 'wal' needs the package pg-logical-replication: npm install pg-logical-replication@^2.5.0.",
    );
  }
  const dialect = database.dialect as PostgresOutboxDialect;
  const { dataSource, table } = database;
  const slot = database.resources.replicationSlot;
  const { created } = await prepareWal(dataSource, dialect, table, slot);
  let reader: PostgresWalReader | undefined;
  const relay: OutboxStreamRelay = {
    slot,
    get streaming() {
      return reader?.streaming ?? false;
    },
    start(host, logger) {
      reader = new PostgresWalReader(dataSource, dialect, { ...settings, slot, table }, host, logger);
      reader.start();
    },
    stop: async () => reader?.stop(),
    lag: () => slotLag(dataSource, slot),
  };
  return { relay, created };
}
