import type { QueryRunner } from 'typeorm';
import { DatabaseBusyError } from '../dialects/database-busy';

/**
 * The connection of `runner`, waited for at most `timeoutMs`: the drivers' pools may queue a request without a time
 * limit (mysql2 always; `pg` without `connectionTimeoutMillis`). On expiry throws `DatabaseBusyError` (answered 503
 * `database-busy`); a connection that arrives later is given back to the pool at once.
 */
export async function connectWithin(runner: QueryRunner, timeoutMs: number): Promise<unknown> {
  const connecting: Promise<unknown> = runner.connect();
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      // Too late for this request: whatever the pool hands over later goes straight back.
      const release = () => runner.release();
      connecting.then(release, release).catch(() => undefined);
      reject(
        new DatabaseBusyError(
          `No database connection became free within ${timeoutMs} ms (idempotency.connectionTimeout): every ` +
            'connection of the pool is in use, or the database does not answer. Raise the pool size (PostgreSQL ' +
            '`extra.max`, MySQL/MariaDB `extra.connectionLimit`), shorten the transactions that hold connections, or ' +
            'raise `connectionTimeout`.',
        ),
      );
    }, timeoutMs);
  });
  try {
    return await Promise.race([connecting, expired]);
  } finally {
    clearTimeout(timer);
  }
}
