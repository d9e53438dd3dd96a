import type { QueryRunner } from 'typeorm';
import { IdempotencyLock, QueryRunnerIdempotencyStore } from '../idempotency/query-runner-idempotency.store';
import { lockDigest } from '../idempotency/idempotency-store';

/**
 * MySQL 8 / MariaDB: a second INSERT of an uncommitted key would wait for the first transaction (up to
 * `innodb_lock_wait_timeout`), so the key is guarded by a named lock tried with timeout 0 — `GET_LOCK(name, 0)` —
 * taken on the connection before the transaction starts and released after it ends. The REPEATABLE READ snapshot
 * starts at the first read, after the lock, so a winner's committed record is always seen. Lock names are
 * server-wide: the name hashes database, table, scope and key (64 characters at most).
 */
export class MysqlIdempotencyStore extends QueryRunnerIdempotencyStore {
  protected async lock(runner: QueryRunner, scope: string, key: string): Promise<IdempotencyLock> {
    const database = String((this.config.dataSource.options as { database?: string }).database ?? '');
    const name = `idem:${lockDigest(database, this.config.table, scope, key).toString('base64url').slice(0, 43)}`;
    const { records } = await this.dialect.execute(runner.manager, 'SELECT GET_LOCK(?, 0) AS `locked`', [name]);
    const locked = Number(records[0]?.locked) === 1;
    return {
      locked,
      release: async () => {
        if (locked) await this.dialect.execute(runner.manager, 'DO RELEASE_LOCK(?)', [name]);
      },
    };
  }

  protected deleteExpiredSql(limit: number): string {
    const q = (c: string) => this.dialect.quote(c);
    return `DELETE FROM ${this.quotedTable} WHERE ${q('expires_at')} <= ${this.dialect.nowMs} ORDER BY ${q('expires_at')} LIMIT ${limit}`;
  }
}
