import type { DataSource, EntityManager } from 'typeorm';
import type { SqlDialectCore } from '../sql-dialect.core';

/** Per DataSource: whether its server is MariaDB (asked once with `SELECT VERSION()`). */
const mariadbOf = new WeakMap<DataSource, Promise<boolean>>();

function isMariaDb(dialect: SqlDialectCore, manager: EntityManager): Promise<boolean> {
  const dataSource = manager.connection;
  let known = mariadbOf.get(dataSource);
  if (!known) {
    known = dialect
      .execute(manager, 'SELECT VERSION() AS `version`')
      .then(({ records }) => /mariadb/i.test(String(records[0]?.version)));
    known.catch(() => mariadbOf.delete(dataSource)); // asked again next time
    mariadbOf.set(dataSource, known);
  }
  return known;
}

/**
 * `sql` (one SELECT, INSERT or DELETE) waiting for locks at most `ms`, rounded up to whole seconds (the servers count
 * lock waits in seconds), for this statement only: on MariaDB `SET STATEMENT innodb_lock_wait_timeout = n,
 * lock_wait_timeout = n FOR …` (row and metadata locks); on MySQL the `SET_VAR(lock_wait_timeout = n)` hint, which
 * bounds metadata locks (a DDL on the table) — MySQL cannot set `innodb_lock_wait_timeout` for one statement. A wait
 * that reaches it fails with `ER_LOCK_WAIT_TIMEOUT` (1205).
 */
export async function withLockWait(
  dialect: SqlDialectCore,
  manager: EntityManager,
  sql: string,
  ms: number,
): Promise<string> {
  const seconds = Math.max(1, Math.ceil(ms / 1000));
  if (await isMariaDb(dialect, manager)) {
    return `SET STATEMENT innodb_lock_wait_timeout = ${seconds}, lock_wait_timeout = ${seconds} FOR ${sql.trim()}`;
  }
  return sql.replace(/^\s*(SELECT|INSERT|DELETE)\b/i, `$1 /*+ SET_VAR(lock_wait_timeout = ${seconds}) */`);
}
