import { someInErrorChain } from '../util/error-chain';

/**
 * Tells "the database is busy" (it answers, but no connection became free in time, or a statement gave up waiting
 * for a lock or ran past its timeout: answer 503 `database-busy` and let the client retry with the same key) from
 * "unreachable" (`database-unavailable.ts`) and from every other database error. Looks through the wrappers drivers
 * and TypeORM put around the cause (`driverError`, `cause`, `AggregateError.errors`), as `isDatabaseUnavailable`.
 */

/** No connection of the pool became free within `connectionTimeout` (thrown by the library's own wait). */
export class DatabaseBusyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DatabaseBusyError';
  }
}

/**
 * PostgreSQL SQLSTATE: `55P03` lock_not_available (`lock_timeout`, `NOWAIT`), `57014` query_canceled
 * (`statement_timeout`), `53300` too_many_connections.
 */
const PG_STATE = /^(55P03|57014|53300)$/;

/**
 * MySQL / MariaDB: `ER_LOCK_WAIT_TIMEOUT` (1205, `innodb_lock_wait_timeout`), `ER_QUERY_TIMEOUT` (MySQL 3024,
 * `max_execution_time`), `ER_STATEMENT_TIMEOUT` (MariaDB 1969, `max_statement_time`), `ER_CON_COUNT_ERROR` (1040,
 * too many connections), and mysql2's `POOL_ENQUEUELIMIT` (the pool's `queueLimit` is reached).
 */
const DRIVER_CODES = new Set([
  'ER_LOCK_WAIT_TIMEOUT',
  'ER_QUERY_TIMEOUT',
  'ER_STATEMENT_TIMEOUT',
  'ER_CON_COUNT_ERROR',
  'POOL_ENQUEUELIMIT',
]);
const MYSQL_ERRNOS = new Set([1205, 3024, 1969, 1040]);

/** `pg-pool`: waiting for a free pooled client took longer than `connectionTimeoutMillis` (it sets no code). */
const POOL_WAIT = /timeout exceeded when trying to connect/i;

/** True when `error` (or what it wraps) says the database is saturated: a pool wait, lock wait or statement timeout. */
export function isDatabaseBusy(error: unknown): boolean {
  return someInErrorChain(error, (current) => {
    if (current instanceof DatabaseBusyError) return true;
    const { code, errno, message } = current;
    if (typeof code === 'string' && (DRIVER_CODES.has(code) || PG_STATE.test(code))) return true;
    if (typeof errno === 'number' && MYSQL_ERRNOS.has(errno)) return true;
    return typeof message === 'string' && POOL_WAIT.test(message);
  });
}
