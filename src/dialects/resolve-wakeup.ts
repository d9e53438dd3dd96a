import type { OutboxDatabase } from './outbox-database';
import { PostgresWakeup } from './postgres/postgres.wakeup';

/**
 * Wakes the publishers of other processes after a commit that wrote outbox rows, where the database can
 * (PostgreSQL LISTEN/NOTIFY). A latency hint only: polling still guarantees delivery.
 */
export interface OutboxWakeup {
  /** Sends a wake-up to the other processes (coalesced; never throws). */
  notify(): void;
  /** Starts listening for other processes' wake-ups and calls `onWake` for each. */
  listen(onWake: () => void): Promise<void>;
  /** Stops listening and sending. */
  close(): Promise<void>;
}

/** The wake-up of the outbox's database, or `undefined` when it has none (MySQL/MariaDB, SQLite). */
export function resolveWakeup(database: OutboxDatabase, instanceId: string): OutboxWakeup | undefined {
  if (database.dialect.name === 'postgres')
    return new PostgresWakeup(database.dataSource, database.resources.notifyChannel, instanceId);
  return undefined;
}
