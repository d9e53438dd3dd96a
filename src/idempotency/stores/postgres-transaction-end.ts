import type { PoolClient, QueryConfig } from 'pg';
import type { QueryRunner } from 'typeorm';

/** The parts of TypeORM's PostgreSQL query runner that a transaction driven over its raw client must reset. */
type RunnerState = { isTransactionActive: boolean; transactionDepth: number };

/**
 * Sends one round trip of the library's own statements over `client`, answered within `timeoutMs` or failed with
 * `pg`'s "Query read timeout" (its per-query `query_timeout`, measured by the client): a database that stalls
 * without closing the connection cannot hold the request longer. The connection is then mid-statement: end the
 * transaction with `abortPostgresTransaction`, which discards it.
 */
export function queryWithin(client: PoolClient, sql: string, timeoutMs: number | undefined): Promise<any> {
  if (timeoutMs === undefined) return client.query(sql);
  return client.query({ text: sql, query_timeout: timeoutMs } as QueryConfig);
}

/** True for `pg`'s "Query read timeout": the statement may still be running and the connection is not reusable. */
export function isQueryReadTimeout(error: unknown): boolean {
  return error instanceof Error && /Query read timeout/i.test(error.message);
}

/**
 * Sends the last statements of a transaction driven over `runner`'s raw `client` (`COMMIT`, `ROLLBACK`, or the
 * record's insert with `COMMIT`), within `timeoutMs` (see `queryWithin`), resets TypeORM's view of the runner and
 * releases it. When even that fails (the connection died or stalled mid-request), the connection is released with
 * the error, so the pool discards it instead of handing a dead client to the next request.
 */
export async function endPostgresTransaction(
  runner: QueryRunner,
  client: PoolClient,
  sql: string,
  timeoutMs?: number,
): Promise<void> {
  let failure: unknown;
  try {
    await queryWithin(client, sql, timeoutMs);
  } catch (error) {
    failure = error;
    throw error;
  } finally {
    await releasePostgresRunner(runner, failure);
  }
}

/**
 * Ends a transaction whose last round trip failed with `error`, never throwing: after a read timeout the connection
 * is discarded at once (a `ROLLBACK` would queue behind the statement still in flight); else `ROLLBACK`, bounded.
 */
export async function abortPostgresTransaction(
  runner: QueryRunner,
  client: PoolClient,
  error: unknown,
  timeoutMs?: number,
): Promise<void> {
  if (isQueryReadTimeout(error)) {
    await releasePostgresRunner(runner, error).catch(() => undefined);
    return;
  }
  await endPostgresTransaction(runner, client, 'ROLLBACK', timeoutMs).catch(() => undefined);
}

/** Resets TypeORM's view of `runner` and releases it; with `failure`, so that the pool discards the connection. */
async function releasePostgresRunner(runner: QueryRunner, failure: unknown): Promise<void> {
  const state = runner as unknown as RunnerState;
  state.isTransactionActive = false;
  state.transactionDepth = 0;
  const release = (runner as unknown as { releasePostgresConnection?: (error?: unknown) => Promise<void> })
    .releasePostgresConnection;
  await (failure && release ? release.call(runner, failure) : runner.release());
}
