import type { PoolClient } from 'pg';
import type { EntityManager, QueryRunner } from 'typeorm';
import type { SqlOutboxDialect } from '../../dialects/sql-dialect.base';
import { runInTransactionContext } from '../../transaction/transaction-context';
import { runAfterCommit, runOnConnection } from '../../transaction/transaction-runner';
import {
  attemptContext,
  IdempotencyAttempt,
  IdempotencyBegin,
  IdempotencyStore,
  IdempotencyStoreConfig,
  IdempotencyTake,
  isKeyViolation,
  NewIdempotencyRecord,
  RECORD_COLUMNS,
  StoredIdempotencyRecord,
  toStored,
} from '../idempotency-store';
import { sha256Hex } from '../../util/sha256';
import { CHEAP_NOW_MS, PostgresMessageClaim } from './postgres.message-claim';
import { PostgresPreparedStatements } from './postgres-prepared-statements';
import { abortPostgresTransaction, endPostgresTransaction, queryWithin } from './postgres-transaction-end';
import { pgLiteral } from '../../dialects/postgres/postgres-literal';
import { connectWithin, IdempotencyWaitLimits } from './connection-wait';
import { lockTimeoutSql, LOCK_TIMEOUT_RESET } from './postgres-lock-timeout';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../idempotency.options';

/** The columns an insert writes, in the order of its values. */
const INSERT_COLUMNS = [
  'scope',
  'idempotency_key',
  'fingerprint',
  'response_status',
  'response_body',
  'response_headers',
  'created_at',
  'expires_at',
] as const;

/**
 * Takes the request's lock `r` (key and fingerprint), and only when it got it the key's lock `k` (CASE evaluates
 * in order): `taken` is 2 with both, 1 with `r` only (the key is held by another request: 422), 0 with neither (a
 * request with this fingerprint is contending: 409). The key's holder so always holds the lock of its own
 * fingerprint; taking `k` first could meet a holder that had not taken `r` yet, and tell a retry it is another
 * request.
 */
function takeLocksSql(keyLock: string, requestLock: string): string {
  return (
    `SELECT CASE WHEN pg_try_advisory_xact_lock(${requestLock}) ` +
    `THEN CASE WHEN pg_try_advisory_xact_lock(${keyLock}) THEN 2 ELSE 1 END ELSE 0 END AS taken`
  );
}

/**
 * PostgreSQL, with as few round trips as the guarantees allow (each costs more CPU than the statements in it):
 *
 * 1. `BEGIN; SET LOCAL lock_timeout; SELECT <advisory locks r, then k: takeLocksSql>;
 *    SELECT <record>; SET LOCAL lock_timeout TO DEFAULT` — one round trip. The transaction-scoped advisory lock `k` on a hash of (table, scope, key) never waits: a concurrent
 *    duplicate learns at once that the key is in flight (409) instead of blocking on the uncommitted unique key;
 *    `r`, on (table, scope, key, fingerprint) and taken first, tells it whether the request in flight is its own
 *    (409) or a different one (422). The record is read by its own statement, after the locks, so under READ COMMITTED a
 *    winner that just committed (and released its locks) is seen.
 * 2. The handler's statements, in this transaction.
 * 3. `SET LOCAL lock_timeout; INSERT <record>; COMMIT` — one round trip. The unique constraint on (scope, key) stays the final arbiter: if
 *    it fires (a snapshot older than the winner's commit, e.g. under REPEATABLE READ) everything rolls back and the
 *    caller replays the winner's record.
 *
 * The three statements are server-side prepared statements (`postgres-prepared-statements.ts`): PostgreSQL plans
 * them once per connection, not once per request. Statements sent together go through the driver's simple-query
 * protocol, which takes no bound parameters: every literal (the `EXECUTE` arguments too) is written as the `pg`
 * client's own `escapeLiteral` writes it (`pgLiteral`; never concatenated raw), the lock id is a decimal integer
 * and the rest is fixed SQL. Advisory locks are per database and transaction-scoped, so they work behind
 * transaction-pooling proxies (where prepared statements turn themselves off).
 *
 * Every wait is bounded (`IdempotencyWaitLimits`): the pooled connection by `connectionTimeout`, a lock the
 * library's statements meet (a DDL on the table, an uncommitted duplicate of the key) by `lockTimeout`, set only
 * around them (the handler's statements keep the session's value), and each round trip by `statementTimeout`, on
 * the client (a stalled database): a connection whose round trip timed out is discarded, never reused.
 */
export class PostgresIdempotencyStore implements IdempotencyStore {
  private readonly dialect: SqlOutboxDialect;
  private readonly table: string;
  private readonly q: (c: string) => string;
  /** Fixed SQL of the hot path, built once. */
  private readonly sql: { select: string; insert: string; scope: string; key: string };
  private readonly messages: PostgresMessageClaim;
  private readonly statements: PostgresPreparedStatements<'locks' | 'read' | 'insert'>;

  constructor(private readonly config: IdempotencyStoreConfig) {
    this.dialect = config.dialect as unknown as SqlOutboxDialect;
    this.table = this.dialect.quoteTable(config.table);
    this.q = (c) => this.dialect.quote(c);
    const q = this.q;
    this.sql = {
      select: `
        SELECT ${RECORD_COLUMNS.map(q).join(', ')}, ${q('expires_at')} <= ${this.dialect.nowMs} AS ${q('expired')}
        FROM ${this.table}
        WHERE `,
      insert: `
        INSERT INTO ${this.table} (${INSERT_COLUMNS.map(q).join(', ')})
        SELECT `,
      scope: `${q('scope')} = `,
      key: ` AND ${q('idempotency_key')} = `,
    };
    this.messages = new PostgresMessageClaim(config);
    const now = CHEAP_NOW_MS;
    this.statements = new PostgresPreparedStatements({
      locks: {
        params: ['bigint', 'bigint'],
        sql: takeLocksSql('$1', '$2'),
      },
      read: {
        params: ['varchar', 'varchar'],
        sql: `SELECT ${RECORD_COLUMNS.map(q).join(', ')}, ${q('expires_at')} <= ${now} AS ${q('expired')}
          FROM ${this.table} WHERE ${q('scope')} = $1 AND ${q('idempotency_key')} = $2`,
      },
      insert: {
        params: ['varchar', 'varchar', 'varchar', 'int', 'text', 'text', 'bigint'],
        sql: `INSERT INTO ${this.table} (${INSERT_COLUMNS.map(q).join(', ')})
          SELECT $1, $2, $3, $4, $5, $6, n.ms, n.ms + $7 FROM (SELECT ${now} AS ms) AS n`,
      },
    });
  }

  /** A message's key, written first (a redelivery waits for it): see `postgres.message-claim.ts`. */
  claim(
    scope: string,
    key: string,
    fingerprint: string,
    ttl: number,
    limits: IdempotencyWaitLimits = DEFAULT_IDEMPOTENCY_OPTIONS,
  ): Promise<IdempotencyBegin> {
    return this.messages.claim(scope, key, fingerprint, ttl, limits);
  }

  /**
   * The two advisory lock ids: (table, scope, key), and the same with the request's fingerprint mixed in. The first
   * 64 bits of `lockDigest('', table, scope, key)`, computed from its hex form (the same ids as every version).
   */
  private lockIds(scope: string, key: string, fingerprint: string): [string, string] {
    const keyLock = BigInt.asIntN(
      64,
      BigInt(`0x${sha256Hex(`\u0000${this.config.table}\u0000${scope}\u0000${key}\u0000`).slice(0, 16)}`),
    );
    // The fingerprint is itself a SHA-256 (hex): mixing its first 64 bits in needs no second hash.
    const print = /^[0-9a-f]{16}/.test(fingerprint) ? fingerprint : sha256Hex(`\u0000\u0000${fingerprint}\u0000\u0000`);
    const requestLock = BigInt.asIntN(64, keyLock ^ BigInt.asIntN(64, BigInt(`0x${print.slice(0, 16)}`)) ^ 1n);
    return [keyLock.toString(), requestLock.toString()];
  }

  async begin(
    scope: string,
    key: string,
    fingerprint: string,
    limits: IdempotencyWaitLimits = DEFAULT_IDEMPOTENCY_OPTIONS,
  ): Promise<IdempotencyBegin> {
    const runner = this.config.dataSource.createQueryRunner();
    const client = (await connectWithin(runner, limits.connectionTimeout)) as PoolClient;
    const [keyLock, requestLock] = this.lockIds(scope, key, fingerprint);
    const where = this.where(client, scope, key);
    const timeout = limits.statementTimeout;
    let prepared = false;
    let results: Array<{ rows: any[] }>;
    try {
      const ready = this.statements.prepareOn(client, timeout);
      prepared = typeof ready === 'boolean' ? ready : await ready;
      const sql = prepared
        ? `BEGIN; ${lockTimeoutSql(limits)}; ${this.statements.execute('locks', [keyLock, requestLock])}; ` +
          `${this.statements.execute('read', [pgLiteral(client, scope), pgLiteral(client, key)])}; ${LOCK_TIMEOUT_RESET}`
        : `BEGIN; ${lockTimeoutSql(limits)};
        ${takeLocksSql(keyLock, requestLock)};
        ${this.selectSql(where)}; ${LOCK_TIMEOUT_RESET}`;
      results = (await queryWithin(client, sql, timeout)) as Array<{ rows: any[] }>;
    } catch (error) {
      await abortPostgresTransaction(runner, client, error, timeout);
      // The statements vanished from under a prepared connection (a pooling proxy): again, with plain SQL.
      if (prepared && this.statements.outOfStep(error)) return this.begin(scope, key, fingerprint, limits);
      throw error;
    }
    const taken = Number(results[2]?.rows[0]?.taken);
    const { record, expired } = toStored(results[3]?.rows[0]);
    if (record || taken !== 2) {
      await endPostgresTransaction(runner, client, 'ROLLBACK', timeout);
      return record ? { kind: 'stored', record } : { kind: 'in-flight', sameRequest: taken === 0 };
    }
    // Tell TypeORM that its runner is inside a transaction, so the handler's saves join it (nested
    // transactions become savepoints) instead of opening their own.
    const state = runner as unknown as { isTransactionActive: boolean; transactionDepth: number };
    state.isTransactionActive = true;
    state.transactionDepth = 1;
    return { kind: 'acquired', attempt: this.attempt(runner, client, scope, key, where, expired, prepared, limits) };
  }

  /** The same locks and read inside a transaction opened elsewhere (bound parameters; the locks end with it). */
  async takeIn(manager: EntityManager, scope: string, key: string, fingerprint: string): Promise<IdempotencyTake> {
    const q = this.q;
    const [keyLock, requestLock] = this.lockIds(scope, key, fingerprint);
    const locks = await this.dialect.execute(manager, takeLocksSql('$1::bigint', '$2::bigint'), [keyLock, requestLock]);
    const { records } = await this.dialect.execute(
      manager,
      `
        SELECT ${RECORD_COLUMNS.map(q).join(', ')}, ${q('expires_at')} <= ${this.dialect.nowMs} AS ${q('expired')}
        FROM ${this.table}
        WHERE ${q('scope')} = $1 AND ${q('idempotency_key')} = $2`,
      [scope, key],
    );
    const { record, expired } = toStored(records[0]);
    if (record) return { kind: 'stored', record };
    const taken = Number(locks.records[0]?.taken);
    if (taken !== 2) return { kind: 'in-flight', sameRequest: taken === 0 };
    return { kind: 'acquired', expired, release: async () => undefined };
  }

  async insertIn(
    manager: EntityManager,
    scope: string,
    key: string,
    record: NewIdempotencyRecord,
    replaceExpired: boolean,
  ): Promise<void> {
    const q = this.q;
    const where = `${q('scope')} = $1 AND ${q('idempotency_key')} = $2`;
    if (replaceExpired) await this.dialect.execute(manager, `DELETE FROM ${this.table} WHERE ${where}`, [scope, key]);
    const now = this.dialect.nowMs;
    await this.dialect.execute(
      manager,
      `
        INSERT INTO ${this.table} (${INSERT_COLUMNS.map(q).join(', ')})
        SELECT $1, $2, $3, $4::int, $5, $6, n.ms, n.ms + $7::bigint
        FROM (SELECT ${now} AS ms) AS n`,
      [scope, key, record.fingerprint, record.status, record.body, record.headers, Math.floor(record.ttl)],
    );
  }

  async read(scope: string, key: string): Promise<StoredIdempotencyRecord | undefined> {
    return runOnConnection(this.config.dataSource, async (manager) => {
      const q = this.q;
      const { records } = await this.dialect.execute(
        manager,
        `
          SELECT ${RECORD_COLUMNS.map(q).join(', ')}, ${q('expires_at')} <= ${this.dialect.nowMs} AS ${q('expired')}
          FROM ${this.table}
          WHERE ${q('scope')} = $1 AND ${q('idempotency_key')} = $2`,
        [scope, key],
      );
      return toStored(records[0]).record;
    });
  }

  /**
   * Deletes up to `limit` expired records, in no particular order: the shipped migrations index `expires_at` with
   * BRIN (`IdempotencyExpiryBrin1765584000000`), which finds expired rows by block range but cannot hand them out
   * sorted — an `ORDER BY` would sort every expired row on each batch.
   */
  async deleteExpired(limit: number): Promise<number> {
    const q = this.q;
    const { affected } = await this.dialect.execute(
      this.config.dataSource.manager,
      `
        DELETE FROM ${this.table}
        WHERE ${q('id')} IN (
          SELECT ${q('id')}
          FROM ${this.table}
          WHERE ${q('expires_at')} <= ${this.dialect.nowMs}
          LIMIT ${Math.max(1, Math.floor(limit))}
        )`,
    );
    return affected;
  }

  private where(client: PoolClient, scope: string, key: string): string {
    return `${this.sql.scope}${pgLiteral(client, scope)}${this.sql.key}${pgLiteral(client, key)}`;
  }

  private selectSql(where: string): string {
    return this.sql.select + where;
  }

  private attempt(
    runner: QueryRunner,
    client: PoolClient,
    scope: string,
    key: string,
    where: string,
    expired: boolean,
    prepared: boolean,
    limits: IdempotencyWaitLimits,
  ): IdempotencyAttempt {
    const context = attemptContext(this.config.dataSource, runner.manager);
    const lit = (value: string | null) => (value === null ? 'NULL' : pgLiteral(client, value));
    const timeout = limits.statementTimeout;
    const rollback = async () => {
      // A failed statement leaves the transaction aborted; ROLLBACK ends it either way.
      await endPostgresTransaction(runner, client, 'ROLLBACK', timeout);
    };
    const commitWith = async (sql: string) => {
      try {
        await queryWithin(client, sql, timeout);
      } catch (error) {
        await abortPostgresTransaction(runner, client, error, timeout);
        throw error;
      }
      const state = runner as unknown as { isTransactionActive: boolean; transactionDepth: number };
      state.isTransactionActive = false;
      state.transactionDepth = 0;
      await runner.release();
      runAfterCommit(context);
    };
    return {
      context,
      run: (work) => runInTransactionContext(context, work),
      commit: async (record: NewIdempotencyRecord) => {
        const now = this.dialect.nowMs;
        const status = record.status === null ? 'NULL' : String(Math.floor(record.status));
        const ttl = String(Math.floor(record.ttl));
        const values = [lit(scope), lit(key), lit(record.fingerprint), status, lit(record.body), lit(record.headers)];
        const insert = prepared
          ? this.statements.execute('insert', [...values, ttl])
          : `${this.sql.insert}${values.join(', ')}, n.ms, n.ms + ${ttl} FROM (SELECT ${now} AS ms) AS n`;
        const sql =
          `${lockTimeoutSql(limits)}; ` +
          (expired ? `DELETE FROM ${this.table} WHERE ${where}; ` : '') +
          `${insert}; COMMIT`;
        try {
          await commitWith(sql);
        } catch (error) {
          if (isKeyViolation(this.config, error)) return false;
          throw error;
        }
        return true;
      },
      commitWithoutRecord: () => commitWith('COMMIT'),
      rollback,
    };
  }
}
