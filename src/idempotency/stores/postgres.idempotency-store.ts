import type { OutboxStatement } from '../../transaction/transaction.types';
import { sha256Hex } from '../../util/sha256';
import type { IdempotencyWaitLimits } from './connection-wait';
import { KeyLock, SqlIdempotencyStore } from './sql.idempotency-store';

/** Gives the handler's statements the session's `lock_timeout` back (the value it started with). */
const LOCK_TIMEOUT_RESET: OutboxStatement = { sql: 'SET LOCAL lock_timeout TO DEFAULT' };

/**
 * PostgreSQL: the key is guarded by transaction-scoped advisory locks tried without waiting
 * (`pg_try_advisory_xact_lock`) on a hash of (table, scope, key) and of (table, scope, key, fingerprint): a
 * concurrent duplicate learns at once that the key is in flight instead of blocking on the uncommitted unique key.
 * They end with the transaction, and work behind transaction-pooling proxies. With the built-in transactions the
 * runner sends the key's statements with `BEGIN` and the record's with `COMMIT` (`postgres-carrying-runner.ts`), so
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
