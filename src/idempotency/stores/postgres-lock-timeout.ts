import type { IdempotencyWaitLimits } from './connection-wait';

/**
 * `lock_timeout` of the library's own statements, sent in their round trip: `SET LOCAL` lasts until the transaction
 * ends, so a round trip before the handler's statements ends with `LOCK_TIMEOUT_RESET`. An integer of milliseconds:
 * nothing to escape.
 */
export function lockTimeoutSql(limits: IdempotencyWaitLimits): string {
  return `SET LOCAL lock_timeout = ${Math.max(1, Math.floor(limits.lockTimeout))}`;
}

/**
 * Gives the handler's statements the session's `lock_timeout` back: `DEFAULT` is the value the session started with
 * (server, database, role or connection settings such as `options: '-c lock_timeout=…'`), not one changed later by
 * a session-level `SET`.
 */
export const LOCK_TIMEOUT_RESET = 'SET LOCAL lock_timeout TO DEFAULT';
