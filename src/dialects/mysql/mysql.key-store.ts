import type { OutboxStatement } from '../../transaction/transaction.types';
import { withLockWait } from './mysql-lock-wait';
import { type IdempotencyWaitLimits, KeyLock, lockDigest, SqlIdempotencyStore } from '../key-store';

/**
 * MySQL 8 / MariaDB: a second INSERT of an uncommitted key would wait for the first transaction (up to
 * `innodb_lock_wait_timeout`), so the key is guarded by named locks tried with timeout 0 — `GET_LOCK(name, 0)` —
 * taken on the transaction's connection and released after the transaction ends (named locks outlive
 * transactions). The REPEATABLE READ snapshot starts at the record's read, after the locks, so a winner's committed
 * record is always seen. Lock names are server-wide: the name hashes database, table, scope and key (64 characters
 * at most). The lock of the request's fingerprint is released after the key's, the order `KeyLock` relies on.
 *
 * The record's read and write wait for locks at most `lockTimeout` (whole seconds, set for that statement only:
 * `withLockWait`); on MySQL that bounds metadata locks only, and the named lock keeps the record's row uncontended.
 */
export class MysqlIdempotencyStore extends SqlIdempotencyStore {
  protected async bounded(statements: OutboxStatement[], limits: IdempotencyWaitLimits) {
    const manager = this.config.dataSource.manager;
    const bounded = await Promise.all(
      statements.map(async ({ sql, params }) => ({
        sql: await withLockWait(this.dialect, manager, sql, limits.lockTimeout),
        params,
      })),
    );
    return { statements: bounded, offset: 0 };
  }

  protected lock(scope: string, key: string, fingerprint: string): KeyLock {
    const database = String((this.config.dataSource.options as { database?: string }).database ?? '');
    const nameOf = (print: string) =>
      `idem:${lockDigest(database, this.config.table, scope, key, print).toString('base64url').slice(0, 43)}`;
    const [keyLock, requestLock] = [nameOf(''), nameOf(fingerprint)];
    return {
      statement: {
        sql: 'SELECT IF(GET_LOCK(?, 0) = 1, IF(GET_LOCK(?, 0) = 1, 2, 1), 0) AS `taken`',
        params: [requestLock, keyLock],
      },
      // The key's lock first, then the fingerprint's; RELEASE_LOCK of a lock this connection does not hold (another
      // request's, or none) releases nothing.
      release: [{ sql: 'DO RELEASE_LOCK(?), RELEASE_LOCK(?)', params: [keyLock, requestLock] }],
    };
  }

  protected deleteExpiredSql(limit: number): string {
    const q = (c: string) => this.dialect.quote(c);
    return `
      DELETE FROM ${this.table}
      WHERE ${q('expires_at')} <= ${this.dialect.nowMs}
      ORDER BY ${q('expires_at')}
      LIMIT ${limit}`;
  }
}
