import { someInErrorChain } from '../util/error-chain';

/**
 * Tells "the database cannot be reached right now" (a transient outage: answer 503 and let the client retry with the
 * same key) from every other database error (a bug or bad data: let it surface). Looks through the wrappers drivers
 * and TypeORM put around the cause (`driverError`, `cause`, `AggregateError.errors`). A database that answers but is
 * saturated (a pool wait, lock wait or statement timeout, too many connections) is "busy" instead:
 * `database-busy.ts`.
 */

/** Node socket and DNS errors of a connection that failed or died. */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** Driver error codes of a lost, refused or timed-out connection (mysql2 / mysql, better-sqlite3). */
const DRIVER_CODES = new Set([
  // MySQL / MariaDB (mysql2, mysql)
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'PROTOCOL_ENQUEUE_AFTER_FATAL_ERROR',
  'PROTOCOL_ENQUEUE_AFTER_QUIT',
  'ER_SERVER_SHUTDOWN',
  'ER_NORMAL_SHUTDOWN',
  // SQLite: another process holds the database file
  'SQLITE_BUSY',
]);

/** SQLSTATE of PostgreSQL: class 08 (connection exception) and the server shutting down or starting up. */
const PG_STATE = /^(08...|57P01|57P02|57P03)$/;

/** Messages of `pg` / `pg-pool` (which set no code) and of mysql2 when its connection is gone. */
const MESSAGES = [
  /Connection terminated/i, // pg: 'Connection terminated unexpectedly', '… due to connection timeout'
  /Client has encountered a connection error and is not queryable/i, // pg
  /Client was closed and is not queryable/i, // pg
  /Can't add new command when connection is in closed state/i, // mysql2
  /Pool is closed/i,
  /Query read timeout/i, // pg: `query_timeout` elapsed
];

/** True when `error` (or what it wraps) says the database is unreachable or the connection to it was lost. */
export function isDatabaseUnavailable(error: unknown): boolean {
  return someInErrorChain(error, ({ code, message }) => {
    if (typeof code === 'string' && (SOCKET_CODES.has(code) || DRIVER_CODES.has(code) || PG_STATE.test(code)))
      return true;
    return typeof message === 'string' && MESSAGES.some((pattern) => pattern.test(message));
  });
}
