/**
 * The claim-scale benchmark's databases: a scratch PostgreSQL or MariaDB database with the outbox tables, history
 * and pending rows seeded in a few set-based statements (generate_series on PostgreSQL, the sequence engine's
 * `seq_1_to_N` on MariaDB), and the plan of one claim (`EXPLAIN (ANALYZE, BUFFERS)` / MariaDB's `ANALYZE`) taken
 * inside a transaction that is rolled back.
 */
import { DataSource } from 'typeorm';
import { OutboxMessage } from '../src';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { IdempotencyStep } from '../src/schema/idempotency-step.entity';
import { OutboxAttempt } from '../src/schema/outbox-attempt.entity';
import { OutboxKeyLock } from '../src/schema/outbox-key-lock.entity';
import type { SqlOutboxDialect } from '../src/dialects/sql-dialect.base';
import { MysqlOutboxDialect } from '../src/dialects/mysql/mysql.dialect';
import { PostgresOutboxDialect } from '../src/dialects/postgres/postgres.dialect';
import { PG, uniqueName } from './relay-support';

export type BenchDatabaseKind = 'postgres' | 'mariadb';

export const MARIADB = { host: '127.0.0.1', port: 3306, username: 'root', password: '' };

export interface SeededDatabase {
  kind: BenchDatabaseKind;
  ds: DataSource;
  dialect: SqlOutboxDialect;
  drop(): Promise<void>;
}

const CHUNK = 200_000;

/** A fresh database of `kind` with the outbox tables (made by TypeORM from the entities). */
export async function createDatabase(kind: BenchDatabaseKind): Promise<SeededDatabase> {
  const name = uniqueName('outbox_cs');
  const admin =
    kind === 'postgres'
      ? new DataSource({ type: 'postgres', ...PG, username: 'postgres', database: 'postgres' })
      : new DataSource({ type: 'mariadb', ...MARIADB, database: 'test' });
  await admin.initialize();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.destroy();
  const entities = [OutboxMessage, OutboxKeyLock, OutboxAttempt, IdempotencyRecord, IdempotencyStep];
  const ds =
    kind === 'postgres'
      ? new DataSource({ type: 'postgres', ...PG, username: 'postgres', database: name, entities, synchronize: true })
      : new DataSource({ type: 'mariadb', ...MARIADB, database: name, entities, synchronize: true });
  await ds.initialize();
  return {
    kind,
    ds,
    dialect: kind === 'postgres' ? new PostgresOutboxDialect() : new MysqlOutboxDialect(),
    drop: async () => {
      await ds.destroy();
      const a =
        kind === 'postgres'
          ? new DataSource({ type: 'postgres', ...PG, username: 'postgres', database: 'postgres' })
          : new DataSource({ type: 'mariadb', ...MARIADB, database: 'test' });
      await a.initialize();
      await a.query(kind === 'postgres' ? `DROP DATABASE IF EXISTS ${name} WITH (FORCE)` : `DROP DATABASE ${name}`);
      await a.destroy();
    },
  };
}

/**
 * Inserts `count` rows with `status` (every other row keyed k0..k999 when `keyed`), pattern `pattern`, in chunks.
 * Message ids are time-ordered, as the library's UUIDv7 ids are: `<prefix>-<12-digit counter>`; with
 * `CLAIM_SCALE_IDS=random` they are random UUIDs (v4), as ids an app passes itself may be.
 */
export async function seedRows(
  db: SeededDatabase,
  count: number,
  status: 'pending' | 'sent' | 'dead',
  pattern: string,
  keyed: boolean,
  idPrefix: string,
): Promise<void> {
  const now = db.dialect.nowMs;
  const random = process.env.CLAIM_SCALE_IDS === 'random';
  for (let done = 0; done < count; done += CHUNK) {
    const n = Math.min(CHUNK, count - done);
    if (db.kind === 'postgres') {
      await db.ds.query(
        `INSERT INTO outbox_messages (message_id, pattern, payload, headers, ordering_key, status, attempts, available_at, created_at, sent_at, dead_at)
         SELECT ${random ? `gen_random_uuid()::text || $3` : `$3 || '-' || lpad((${done} + g)::text, 12, '0')`}, $4, '{"n":' || g || ',"pad":"' || repeat('x', 180) || '"}', NULL,
                CASE WHEN ${keyed ? 'g % 2 = 0' : 'false'} THEN 'k' || (g % 1000) END, $2, ${status === 'pending' ? 0 : 1},
                ${now}, ${now}, ${status === 'sent' ? now : 'NULL'}, ${status === 'dead' ? now : 0}
         FROM generate_series(1, $1::int) g`,
        [n, status, idPrefix, pattern],
      );
    } else {
      await db.ds.query(
        `INSERT INTO outbox_messages (message_id, pattern, payload, headers, ordering_key, status, attempts, available_at, created_at, sent_at, dead_at)
         SELECT ${random ? 'CONCAT(UUID(), ?)' : `CONCAT(?, '-', LPAD(${done} + s.seq, 12, '0'))`}, ?, CONCAT('{"n":', s.seq, ',"pad":"', REPEAT('x', 180), '"}'), NULL,
                CASE WHEN ${keyed ? 's.seq % 2 = 0' : 'false'} THEN CONCAT('k', s.seq % 1000) END, ?, ${status === 'pending' ? 0 : 1},
                ${now}, ${now}, ${status === 'sent' ? now : 'NULL'}, ${status === 'dead' ? now : 0}
         FROM seq_1_to_${n} s`,
        [idPrefix, pattern, status],
      );
    }
  }
}

/** Refreshes the planner's statistics (and, on PostgreSQL, vacuums the dead row versions of the last round). */
export async function analyze(db: SeededDatabase): Promise<void> {
  await db.ds.query(db.kind === 'postgres' ? 'VACUUM ANALYZE outbox_messages' : 'ANALYZE TABLE outbox_messages');
}

/**
 * The plan of one claim of `limit` rows, measured by running it (then rolled back). PostgreSQL: `EXPLAIN (ANALYZE,
 * BUFFERS)` of the claim statement the dialect sends (captured from its `execute()`). MariaDB: `ANALYZE` of the
 * claim's `SELECT … FOR UPDATE SKIP LOCKED` and of its key-prefix check.
 */
export async function claimPlan(db: SeededDatabase, limit: number): Promise<string> {
  const statements: Array<{ sql: string; params: unknown[] }> = [];
  const capture = Object.create(db.dialect) as SqlOutboxDialect;
  capture.execute = async (manager, sql, params = [], options = {}) => {
    statements.push({ sql, params });
    return db.dialect.execute.call(capture, manager, sql, params, { ...options, relay: false, name: undefined });
  };
  const runner = db.ds.createQueryRunner();
  await runner.connect();
  try {
    await runner.startTransaction('READ COMMITTED');
    await capture.claim(runner.manager, { table: 'outbox_messages', owner: 'plan', limit, leaseMs: 60_000 });
    await runner.rollbackTransaction();
    const lines: string[] = [];
    await runner.startTransaction('READ COMMITTED');
    const explained =
      db.kind === 'postgres' ? statements.slice(0, 1) : statements.filter((s) => /^\s*SELECT/.test(s.sql));
    for (const { sql, params } of explained) {
      const prefix = db.kind === 'postgres' ? 'EXPLAIN (ANALYZE, BUFFERS) ' : 'ANALYZE ';
      const rows: any[] = await runner.query(prefix + sql, params);
      if (db.kind === 'postgres') lines.push(...rows.map((r) => String(r['QUERY PLAN'])));
      else {
        lines.push(sql.replace(/\s+/g, ' ').trim().slice(0, 160) + ' …');
        for (const r of rows) {
          lines.push(
            `  ${r.select_type} ${r.table} type=${r.type} key=${r.key ?? '-'} rows=${r.rows} r_rows=${r.r_rows} ` +
              `filtered=${r.filtered} r_filtered=${r.r_filtered} ${r.Extra ?? ''}`,
          );
        }
      }
    }
    await runner.rollbackTransaction();
    return lines.join('\n');
  } finally {
    if (runner.isTransactionActive) await runner.rollbackTransaction();
    await runner.release();
  }
}
