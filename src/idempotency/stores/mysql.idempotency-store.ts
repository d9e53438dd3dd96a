import type { EntityManager, QueryRunner } from 'typeorm';
import { IdempotencyLock, QueryRunnerIdempotencyStore } from './query-runner.idempotency-store';
import { lockDigest } from '../idempotency-store';
import type { IdempotencyWaitLimits } from './connection-wait';
import { withLockWait } from '../../dialects/mysql/mysql-lock-wait';

/**
 * MySQL 8 / MariaDB: a second INSERT of an uncommitted key would wait for the first transaction (up to
 * `innodb_lock_wait_timeout`), so the key is guarded by a named lock tried with timeout 0 — `GET_LOCK(name, 0)` —
 * taken on the connection before the transaction starts and released after it ends. The REPEATABLE READ snapshot
 * starts at the first read, after the lock, so a winner's committed record is always seen. Lock names are
 * server-wide: the name hashes database, table, scope and key (64 characters at most).
 *
 * A second lock, on (key, fingerprint), tells a loser whether the request in flight is its own (409) or another
 * one (422). It is taken first, and the key only by whoever holds it, so the holder of a key always holds the lock
 * of its own fingerprint (from before it took the key until after it gave it back). A loser that holds the lock of
 * its fingerprint while the key is held elsewhere therefore knows the holder's request differs: 422. A loser that
 * cannot take it knows a request with its fingerprint is contending — the holder, or one about to learn the key is
 * taken — and answers 409, which a retry turns into the final answer. (Taking the key first and asking about the
 * fingerprint after could see a holder that had not yet taken its fingerprint lock, and answer 422 to a plain
 * retry under a storm of them.)
 *
 * The record's read and write wait for locks at most `lockTimeout` (whole seconds, set for that statement only:
 * `withLockWait`); on MySQL that bounds metadata locks only, and the named lock keeps the record's row uncontended.
 */
export class MysqlIdempotencyStore extends QueryRunnerIdempotencyStore {
  protected bounded(manager: EntityManager, sql: string, limits: IdempotencyWaitLimits): Promise<string> {
    return withLockWait(this.dialect, manager, sql, limits.lockTimeout);
  }

  protected async lock(runner: QueryRunner, scope: string, key: string, fingerprint: string): Promise<IdempotencyLock> {
    const database = String((this.config.dataSource.options as { database?: string }).database ?? '');
    const nameOf = (print: string) =>
      `idem:${lockDigest(database, this.config.table, scope, key, print).toString('base64url').slice(0, 43)}`;
    const [keyLock, requestLock] = [nameOf(''), nameOf(fingerprint)];
    // 2: both taken; 1: the fingerprint's lock only (the key is held by another request); 0: neither.
    const { records } = await this.dialect.execute(
      runner.manager,
      'SELECT IF(GET_LOCK(?, 0) = 1, IF(GET_LOCK(?, 0) = 1, 2, 1), 0) AS `taken`',
      [requestLock, keyLock],
    );
    const taken = Number(records[0]?.taken);
    let held = taken === 2 ? [keyLock, requestLock] : taken === 1 ? [requestLock] : [];
    return {
      locked: taken === 2,
      sameRequest: taken === 0,
      release: async () => {
        // The key first, then the fingerprint's lock: the order the invariant above needs.
        const names = held;
        held = [];
        if (names.length)
          await this.dialect.execute(runner.manager, `DO ${names.map(() => 'RELEASE_LOCK(?)').join(', ')}`, names);
      },
    };
  }

  protected deleteExpiredSql(limit: number): string {
    const q = (c: string) => this.dialect.quote(c);
    return `
      DELETE FROM ${this.quotedTable}
      WHERE ${q('expires_at')} <= ${this.dialect.nowMs}
      ORDER BY ${q('expires_at')}
      LIMIT ${limit}`;
  }
}
