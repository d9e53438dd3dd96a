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
 * server-wide: the name hashes database, table, scope and key (64 characters at most). A second lock, on the
 * request's fingerprint too, tells a loser whether the request in flight is its own (409) or another one (422).
 *
 * The record's read and write wait for locks at most `lockTimeout` (whole seconds, set for that statement only:
 * `withLockWait`); on MySQL that bounds metadata locks only, and the named lock keeps the record's row uncontended.
 */
export class MysqlIdempotencyStore extends QueryRunnerIdempotencyStore {
  protected bounded(manager: EntityManager, sql: string, limits: IdempotencyWaitLimits): Promise<string> {
    return withLockWait(this.dialect, manager, sql, limits.lockTimeout);
  }

  /**
   * Inside a transaction opened elsewhere the locks are taken in it and released by `release()` before that
   * transaction commits: a request that slips in between blocks on the uncommitted unique key, then gets the
   * duplicate-key error, rolls back and replays.
   */
  protected lockIn(runner: QueryRunner, scope: string, key: string, fingerprint: string): Promise<IdempotencyLock> {
    return this.lock(runner, scope, key, fingerprint);
  }

  protected async lock(runner: QueryRunner, scope: string, key: string, fingerprint: string): Promise<IdempotencyLock> {
    const database = String((this.config.dataSource.options as { database?: string }).database ?? '');
    const nameOf = (print: string) =>
      `idem:${lockDigest(database, this.config.table, scope, key, print).toString('base64url').slice(0, 43)}`;
    const [keyLock, requestLock] = [nameOf(''), nameOf(fingerprint)];
    const { records } = await this.dialect.execute(
      runner.manager,
      'SELECT GET_LOCK(?, 0) AS `locked`, GET_LOCK(?, 0) AS `request`',
      [keyLock, requestLock],
    );
    const locked = Number(records[0]?.locked) === 1;
    const request = Number(records[0]?.request) === 1;
    return {
      locked,
      // Holding the request lock (while not holding the key) means nobody in flight has this fingerprint.
      sameRequest: !request,
      release: async () => {
        const held = [locked && keyLock, request && requestLock].filter((n): n is string => typeof n === 'string');
        if (held.length)
          await this.dialect.execute(runner.manager, `DO ${held.map(() => 'RELEASE_LOCK(?)').join(', ')}`, held);
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
