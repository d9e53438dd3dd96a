import type { PoolClient } from 'pg';
import type { QueryRunner } from 'typeorm';
import type { SqlOutboxDialect } from '../../dialects/sql-dialect.base';
import { runInTransactionContext } from '../../transaction/transaction-context';
import { runAfterCommit } from '../../transaction/transaction-runner';
import { pgLiteral } from '../../dialects/postgres/postgres-literal';
import {
  attemptContext,
  IdempotencyAttempt,
  IdempotencyBegin,
  IdempotencyStoreConfig,
  NewIdempotencyRecord,
  RECORD_COLUMNS,
  toStored,
} from '../idempotency-store';
import { PostgresPreparedStatements } from './postgres-prepared-statements';
import { abortPostgresTransaction, endPostgresTransaction, queryWithin } from './postgres-transaction-end';
import type { IdempotencyWaitLimits } from './connection-wait';
import { connectWithin } from './connection-wait';
import { lockTimeoutSql, LOCK_TIMEOUT_RESET } from './postgres-lock-timeout';

/**
 * Now on the database clock in epoch milliseconds, as the dialect's `nowMs` but through `date_part` (double
 * precision) rather than `extract` (numeric since PostgreSQL 14): the same value, measurably less backend CPU in the
 * one statement a delivery adds.
 */
export const CHEAP_NOW_MS = `(date_part('epoch', clock_timestamp()) * 1000)::bigint`;

/** SQLSTATE of a lock wait that reached `lock_timeout`. */
const LOCK_NOT_AVAILABLE = '55P03';

/** TypeORM's view of whether its runner is inside a transaction. */
type RunnerState = { isTransactionActive: boolean; transactionDepth: number };

/**
 * A message's key taken on PostgreSQL the way a consumer can afford: a redelivery needs no prompt answer (it may
 * wait for the first delivery's transaction), so one statement replaces the advisory locks and the read:
 *
 * 1. `BEGIN; SET LOCAL lock_timeout; INSERT <key> … ON CONFLICT (scope, key) DO UPDATE … WHERE <the record
 *    expired> RETURNING id; SET LOCAL lock_timeout TO DEFAULT` — one round trip. A new key (or an expired record, replaced) returns its row: the delivery owns the key, and the
 *    uncommitted row holds off any redelivery until this transaction ends. A live record returns nothing: the
 *    message was handled. A redelivery racing the first delivery waits on the row — at most `lockTimeout`, then it
 *    is answered in flight — then sees the committed record (skipped) or, after a rollback, takes the key itself.
 * 2. The handler's statements, in this transaction.
 * 3. `COMMIT` — or `UPDATE <the row's response>; COMMIT` when the handler returned a value (`@MessagePattern`).
 *
 * As many round trips as a handler without the record, and one statement more. The statements are server-side
 * prepared statements (`postgres-prepared-statements.ts`), planned once per connection. Literals (the `EXECUTE`
 * arguments too) are written as the `pg` client's own `escapeLiteral` writes them (`pgLiteral`); the row id is an
 * integer from the database.
 */
export class PostgresMessageClaim {
  private readonly sql: { insert: string; conflict: string; select: string; key: string; update: string };
  private readonly statements: PostgresPreparedStatements<'claim' | 'read' | 'respond'>;

  constructor(private readonly config: IdempotencyStoreConfig) {
    const dialect = config.dialect as unknown as SqlOutboxDialect;
    const q = (c: string) => dialect.quote(c);
    const table = dialect.quoteTable(config.table);
    const now = CHEAP_NOW_MS;
    this.sql = {
      insert: `
        INSERT INTO ${table} (${['scope', 'idempotency_key', 'fingerprint', 'created_at', 'expires_at'].map(q).join(', ')})
        VALUES (`,
      conflict: `
        ON CONFLICT (${q('scope')}, ${q('idempotency_key')}) DO UPDATE
        SET ${['fingerprint', 'created_at', 'expires_at'].map((c) => `${q(c)} = EXCLUDED.${q(c)}`).join(', ')},
          ${['response_status', 'response_body', 'response_headers'].map((c) => `${q(c)} = NULL`).join(', ')}
        WHERE ${table}.${q('expires_at')} <= ${now}
        RETURNING ${q('id')}`,
      select: `
        SELECT ${RECORD_COLUMNS.map(q).join(', ')}, ${q('expires_at')} <= ${now} AS ${q('expired')}
        FROM ${table}
        WHERE ${q('scope')} = `,
      key: ` AND ${q('idempotency_key')} = `,
      update: `
        UPDATE ${table}
        SET `,
    };
    const responseColumns = ['response_status', 'response_body', 'response_headers'];
    this.statements = new PostgresPreparedStatements({
      claim: {
        params: ['varchar', 'varchar', 'varchar', 'bigint'],
        sql: `${this.sql.insert}$1, $2, $3, ${now}, ${now} + $4)${this.sql.conflict}`,
      },
      read: { params: ['varchar', 'varchar'], sql: `${this.sql.select}$1${this.sql.key}$2` },
      respond: {
        params: ['int', 'text', 'text', 'bigint'],
        sql: `${this.sql.update}${responseColumns.map((c, i) => `${q(c)} = $${i + 1}`).join(', ')} WHERE ${q('id')} = $4`,
      },
    });
  }

  async claim(
    scope: string,
    key: string,
    fingerprint: string,
    ttl: number,
    limits: IdempotencyWaitLimits,
  ): Promise<IdempotencyBegin> {
    const runner = this.config.dataSource.createQueryRunner();
    const client = (await connectWithin(runner, limits.connectionTimeout)) as PoolClient;
    const timeout = limits.statementTimeout;
    const scopeText = pgLiteral(client, scope);
    const keyText = pgLiteral(client, key);
    let prepared = false;
    let results: Array<{ rows: any[] }>;
    try {
      const ready = this.statements.prepareOn(client, timeout);
      prepared = typeof ready === 'boolean' ? ready : await ready;
      const claim = prepared
        ? this.statements.execute('claim', [
            scopeText,
            keyText,
            pgLiteral(client, fingerprint),
            String(Math.floor(ttl)),
          ])
        : `${this.sql.insert}${scopeText}, ${keyText}, ${pgLiteral(client, fingerprint)}, ${CHEAP_NOW_MS}, ` +
          `${CHEAP_NOW_MS} + ${Math.floor(ttl)})${this.sql.conflict}`;
      const sql = `BEGIN; ${lockTimeoutSql(limits)}; ${claim}; ${LOCK_TIMEOUT_RESET}`;
      results = (await queryWithin(client, sql, timeout)) as Array<{ rows: any[] }>;
    } catch (error) {
      await abortPostgresTransaction(runner, client, error, timeout);
      // The statements vanished from under a prepared connection (a pooling proxy): again, with plain SQL.
      if (prepared && this.statements.outOfStep(error)) return this.claim(scope, key, fingerprint, ttl, limits);
      // The first delivery still holds the key after `lockTimeout`: in flight (requeued, refused or skipped).
      if ((error as { code?: unknown } | null)?.code === LOCK_NOT_AVAILABLE)
        return { kind: 'in-flight', sameRequest: true };
      throw error;
    }
    const id = results[2]?.rows[0]?.id;
    if (id === undefined || id === null) {
      // A live record: read it (a fresh statement sees the commit it waited for) and end the transaction.
      let row: unknown;
      try {
        const { rows } = await queryWithin(
          client,
          prepared
            ? this.statements.execute('read', [scopeText, keyText])
            : `${this.sql.select}${scopeText}${this.sql.key}${keyText}`,
          timeout,
        );
        row = rows[0];
      } catch (error) {
        await abortPostgresTransaction(runner, client, error, timeout);
        throw error;
      }
      await endPostgresTransaction(runner, client, 'ROLLBACK', timeout);
      const { record } = toStored(row);
      // Gone between the two statements (the cleanup deleted it as it expired): let the delivery come back.
      return record ? { kind: 'stored', record } : { kind: 'in-flight', sameRequest: true };
    }
    const state = runner as unknown as RunnerState;
    state.isTransactionActive = true;
    state.transactionDepth = 1;
    return { kind: 'acquired', attempt: this.attempt(runner, client, String(id), prepared, timeout) };
  }

  private attempt(
    runner: QueryRunner,
    client: PoolClient,
    id: string,
    prepared: boolean,
    timeout: number,
  ): IdempotencyAttempt {
    const context = attemptContext(this.config.dataSource, runner.manager);
    const dialect = this.config.dialect as unknown as SqlOutboxDialect;
    // Built only by the rarer endings (a response to store, no record at all): an event handler's delivery needs
    // none of them, so it allocates nothing but the context and its own closures.
    const q = (c: string) => dialect.quote(c);
    const lit = (value: string | null) => (value === null ? 'NULL' : pgLiteral(client, value));
    const where = () => `WHERE ${q('id')} = ${/^\d+$/.test(id) ? id : lit(id)}`;
    const commitWith = async (sql: string) => {
      await endPostgresTransaction(runner, client, sql, timeout);
      runAfterCommit(context);
    };
    return {
      context,
      run: (work) => runInTransactionContext(context, work),
      commit: async (record: NewIdempotencyRecord) => {
        const { status, body, headers } = record;
        if (status === null && body === null && headers === null) {
          await endPostgresTransaction(runner, client, 'COMMIT', timeout);
          if (context.afterCommit.length > 0) runAfterCommit(context);
        } else if (prepared) {
          const status_ = status === null ? 'NULL' : String(Math.floor(status));
          const row = /^\d+$/.test(id) ? id : lit(id);
          await commitWith(`${this.statements.execute('respond', [status_, lit(body), lit(headers), row])}; COMMIT`);
        } else {
          const set = [
            `${q('response_status')} = ${status === null ? 'NULL' : String(Math.floor(status))}`,
            `${q('response_body')} = ${lit(body)}`,
            `${q('response_headers')} = ${lit(headers)}`,
          ].join(', ');
          await commitWith(`${this.sql.update}${set} ${where()}; COMMIT`);
        }
        return true;
      },
      commitWithoutRecord: () => commitWith(`DELETE FROM ${dialect.quoteTable(this.config.table)} ${where()}; COMMIT`),
      rollback: () => endPostgresTransaction(runner, client, 'ROLLBACK', timeout),
    };
  }
}
