import type { OutboxStatement } from '../../transaction/transaction.types';
import { someInErrorChain } from '../../util/error-chain';
import { sha256Hex } from '../../util/sha256';
import {
  IdempotencyTake,
  type IdempotencyWaitLimits,
  KeyLock,
  KeyTaken,
  KeyTaking,
  NewIdempotencyRecord,
  RECORD_COLUMNS,
  SqlIdempotencyStore,
  toStored,
} from '../key-store';

/** SQLSTATE of a lock wait that reached `lock_timeout`. */
const LOCK_NOT_AVAILABLE = '55P03';

/** Gives the handler's statements the session's `lock_timeout` back (the value it started with). */
const LOCK_TIMEOUT_RESET: OutboxStatement = { sql: 'SET LOCAL lock_timeout TO DEFAULT' };

/**
 * PostgreSQL: the key is guarded by transaction-scoped advisory locks tried without waiting
 * (`pg_try_advisory_xact_lock`) on a hash of (table, scope, key) and of (table, scope, key, fingerprint): a
 * concurrent duplicate learns at once that the key is in flight instead of blocking on the uncommitted unique key.
 * They end with the transaction, and work behind transaction-pooling proxies. With the built-in transactions the
 * runner sends the key's statements with BEGIN and the record's with COMMIT (`postgres-carrying-runner.ts`), so
 * a guarded request costs the round trips of an unguarded one.
 *
 * The library's statements wait for a lock (a DDL on the table, an uncommitted duplicate) at most `lockTimeout`:
 * `SET LOCAL lock_timeout` before them, and back to the session's value after the key's, for the handler.
 */
export class PostgresIdempotencyStore extends SqlIdempotencyStore {
  protected async bounded(statements: OutboxStatement[], limits: IdempotencyWaitLimits) {
    const set = { sql: `SET LOCAL lock_timeout = ${Math.max(1, Math.floor(limits.lockTimeout))}` };
    return { statements: [set, ...statements, LOCK_TIMEOUT_RESET], offset: 1 };
  }

  /**
   * A message's key (`message` set) is written first, since a redelivery may wait: `INSERT <key> … ON CONFLICT
   * (scope, key) DO UPDATE … WHERE <the record expired> RETURNING id`, then the record's read, in BEGIN's round
   * trip — no advisory lock. A returned row means the delivery owns the key: its uncommitted row holds off any
   * redelivery until the transaction ends. A redelivery racing it waits on that row, at most `lockTimeout` (then it
   * is in flight: requeued, refused or skipped), then sees the committed record (skipped) or, after a rollback,
   * takes the key itself. Requests keep the locks, which answer a duplicate at once.
   */
  async take(
    scope: string,
    key: string,
    fingerprint: string,
    limits: IdempotencyWaitLimits,
    message?: { ttl: number },
  ): Promise<KeyTaking> {
    if (!message) return super.take(scope, key, fingerprint, limits);
    const { q, table } = this;
    const now = this.dialect.nowMs;
    const write: OutboxStatement = {
      sql: `INSERT INTO ${table} (${['scope', 'idempotency_key', 'fingerprint', 'created_at', 'expires_at'].map(q).join(', ')})
        VALUES ($1, $2, $3, ${now}, ${now} + $4::bigint)
        ON CONFLICT (${q('scope')}, ${q('idempotency_key')}) DO UPDATE
        SET ${['fingerprint', 'created_at', 'expires_at'].map((c) => `${q(c)} = EXCLUDED.${q(c)}`).join(', ')},
          ${['response_status', 'response_body', 'response_headers'].map((c) => `${q(c)} = NULL`).join(', ')}
        WHERE ${table}.${q('expires_at')} <= ${now}
        RETURNING ${q('id')}`,
      params: [scope, key, fingerprint, Math.floor(message.ttl)],
    };
    const { statements, offset } = await this.bounded([write, this.readStatement(scope, key)], limits);
    return {
      statements,
      release: [],
      outcome: (rows): IdempotencyTake => {
        if ((rows[offset] ?? []).length > 0) return { kind: 'acquired', expired: false, written: true };
        const { record } = toStored(rows[offset + 1]?.[0]);
        // No row written and none to read: the record expired between the two statements; like a lock wait.
        return record ? { kind: 'stored', record } : { kind: 'in-flight', sameRequest: true };
      },
      inFlight: (error) => someInErrorChain(error, (e) => e.code === LOCK_NOT_AVAILABLE),
    };
  }

  /** A key written first gets the record's values (a `@MessagePattern`'s reply), if any; else nothing is left to do. */
  async record(
    scope: string,
    key: string,
    record: NewIdempotencyRecord,
    taken: KeyTaken,
    limits: IdempotencyWaitLimits,
  ): Promise<OutboxStatement[]> {
    if (!taken.written) return super.record(scope, key, record, taken, limits);
    if (record.status === null && record.body === null && record.headers === null) return [];
    const [status, body, headers] = RECORD_COLUMNS.slice(1).map((c) => this.q(c));
    const update: OutboxStatement = {
      sql: `UPDATE ${this.table} SET ${status} = $1::int, ${body} = $2, ${headers} = $3
        WHERE ${this.q('scope')} = $4 AND ${this.q('idempotency_key')} = $5`,
      params: [record.status, record.body, record.headers, scope, key],
    };
    return [update];
  }

  protected typed(placeholder: string, type: 'int' | 'bigint'): string {
    return `${placeholder}::${type}`;
  }

  /**
   * The two advisory lock ids: (table, scope, key), and the same with the request's fingerprint mixed in. The first
   * 64 bits of a SHA-256 of (table, scope, key) (the same ids as every version).
   */
  protected lock(scope: string, key: string, fingerprint: string): KeyLock {
    const keyLock = BigInt.asIntN(
      64,
      BigInt(`0x${sha256Hex(`\u0000${this.config.table}\u0000${scope}\u0000${key}\u0000`).slice(0, 16)}`),
    );
    // The fingerprint is itself a SHA-256 (hex): mixing its first 64 bits in needs no second hash.
    const print = /^[0-9a-f]{16}/.test(fingerprint) ? fingerprint : sha256Hex(`\u0000\u0000${fingerprint}\u0000\u0000`);
    const requestLock = BigInt.asIntN(64, keyLock ^ BigInt.asIntN(64, BigInt(`0x${print.slice(0, 16)}`)) ^ 1n);
    return {
      statement: {
        sql:
          'SELECT CASE WHEN pg_try_advisory_xact_lock($1::bigint) ' +
          'THEN CASE WHEN pg_try_advisory_xact_lock($2::bigint) THEN 2 ELSE 1 END ELSE 0 END AS taken',
        params: [requestLock.toString(), keyLock.toString()],
      },
      release: [],
    };
  }

  /**
   * Deletes up to `limit` expired records, in no particular order: the shipped migrations index `expires_at` with
   * BRIN (`IdempotencyExpiryBrin1765584000000`), which finds expired rows by block range but cannot hand them out
   * sorted — an `ORDER BY` would sort every expired row on each batch.
   */
  protected deleteExpiredSql(limit: number): string {
    const q = (c: string) => this.dialect.quote(c);
    return `
      DELETE FROM ${this.table}
      WHERE ${q('id')} IN (
        SELECT ${q('id')} FROM ${this.table} WHERE ${q('expires_at')} <= ${this.dialect.nowMs} LIMIT ${limit}
      )`;
  }
}
