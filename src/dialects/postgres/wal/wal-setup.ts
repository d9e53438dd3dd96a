import type { DataSource } from 'typeorm';
import { OutboxWalUnavailableError } from '../../../errors';
import { describeError } from '../../../util/describe-error';
import type { PostgresOutboxDialect } from '../postgres.dialect';

/** What start-up found: the slot was made now (`created`) or was there. */
export interface WalSetup {
  created: boolean;
}

/**
 * Checks that the database can stream the outbox table's inserts and makes what is missing: the publication
 * (`FOR TABLE … WITH (publish = 'insert')`) and the logical replication slot (`pgoutput`), both named `slot`.
 * Every replica runs it at start-up; two at once are fine (the loser finds the object made). Throws
 * `OutboxWalUnavailableError` saying what is missing and how to fix it.
 */
export async function prepareWal(
  dataSource: DataSource,
  dialect: PostgresOutboxDialect,
  table: string,
  slot: string,
): Promise<WalSetup> {
  const [{ wal_level: level }] = await dataSource.query('SHOW wal_level');
  if (level !== 'logical') {
    throw new OutboxWalUnavailableError(
      `The WAL relay needs wal_level = logical, but this PostgreSQL runs with wal_level = ${level}. Set ` +
        '`wal_level = logical` (postgresql.conf, or the provider\'s "logical replication" flag) and restart it, ' +
        "or use publisher.mode 'poll' (or 'wal-or-poll', which polls until then).",
    );
  }
  const [role] = await dataSource.query(
    `SELECT current_user AS name, rolreplication OR rolsuper OR EXISTS (
       SELECT 1 FROM pg_auth_members am JOIN pg_roles g ON g.oid = am.roleid
       WHERE am.member = r.oid AND g.rolname = 'rds_replication'
     ) AS ok FROM pg_roles r WHERE r.rolname = current_user`,
  );
  if (!role?.ok) {
    throw new OutboxWalUnavailableError(
      `The WAL relay needs a role with the REPLICATION attribute; ${role?.name ?? 'this role'} has none. Run ` +
        `ALTER ROLE "${role?.name ?? '…'}" WITH REPLICATION (on Amazon RDS: GRANT rds_replication TO it), or use ` +
        "publisher.mode 'poll'.",
    );
  }
  await create(
    dataSource,
    `SELECT 1 FROM pg_publication WHERE pubname = $1`,
    `CREATE PUBLICATION ${dialect.quote(slot)} FOR TABLE ${dialect.quoteTable(table)} WITH (publish = 'insert')`,
    [slot],
    `the publication ${slot}`,
  );
  const [existing] = await dataSource.query('SELECT plugin FROM pg_replication_slots WHERE slot_name = $1', [slot]);
  if (existing && existing.plugin !== 'pgoutput') {
    throw new OutboxWalUnavailableError(
      `The replication slot ${slot} exists with the plugin ${existing.plugin}; the WAL relay needs pgoutput. ` +
        `Drop it (SELECT pg_drop_replication_slot('${slot}')) once nothing reads it, and start again.`,
    );
  }
  if (existing) return { created: false };
  const made = await create(
    dataSource,
    'SELECT 1 FROM pg_replication_slots WHERE slot_name = $1',
    `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`,
    [slot],
    `the replication slot ${slot}`,
  );
  return { created: made };
}

/** Runs `make` unless `exists` finds the object; a concurrent maker's `42710` counts as made. */
async function create(
  dataSource: DataSource,
  exists: string,
  make: string,
  params: unknown[],
  what: string,
): Promise<boolean> {
  const found = await dataSource.query(exists, params);
  if (found.length > 0) return false;
  try {
    await dataSource.query(make, make.includes('$1') ? params : []);
    return true;
  } catch (error) {
    const code =
      (error as { driverError?: { code?: string }; code?: string })?.driverError?.code ?? (error as any)?.code;
    if (code === '42710') return false;
    throw new OutboxWalUnavailableError(
      `The WAL relay could not make ${what}: ${describeError(error)}. ` +
        (code === '42501'
          ? 'Grant the role what it needs (ownership of the outbox table for the publication, REPLICATION for the slot) '
          : code === '53400'
            ? 'Raise max_replication_slots (and max_wal_senders) in postgresql.conf and restart PostgreSQL, '
            : 'Fix the cause, ') +
        "or use publisher.mode 'poll'.",
    );
  }
}

/** The slot's lag behind the current WAL, in bytes: unconfirmed and retained; `undefined` when the slot is gone. */
export async function slotLag(
  dataSource: DataSource,
  slot: string,
): Promise<{ lagBytes: number; retainedBytes: number; active: boolean } | undefined> {
  const [row] = await dataSource.query(
    `SELECT active,
       COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::float8 AS lag,
       COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::float8 AS retained
     FROM pg_replication_slots WHERE slot_name = $1`,
    [slot],
  );
  if (!row) return undefined;
  return { lagBytes: Number(row.lag), retainedBytes: Number(row.retained), active: row.active === true };
}
