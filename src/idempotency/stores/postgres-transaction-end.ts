import type { PoolClient } from 'pg';
import type { QueryRunner } from 'typeorm';

/** The parts of TypeORM's PostgreSQL query runner that a transaction driven over its raw client must reset. */
type RunnerState = { isTransactionActive: boolean; transactionDepth: number };

/**
 * Sends the last statements of a transaction driven over `runner`'s raw `client` (`COMMIT`, `ROLLBACK`, or the
 * record's insert with `COMMIT`), resets TypeORM's view of the runner and releases it. When even that fails (the
 * connection died mid-request), the connection is released with the error, so the pool discards it instead of
 * handing a dead client to the next request.
 */
export async function endPostgresTransaction(runner: QueryRunner, client: PoolClient, sql: string): Promise<void> {
  const state = runner as unknown as RunnerState;
  let failure: unknown;
  try {
    await client.query(sql);
  } catch (error) {
    failure = error;
    throw error;
  } finally {
    state.isTransactionActive = false;
    state.transactionDepth = 0;
    const release = (runner as unknown as { releasePostgresConnection?: (error?: unknown) => Promise<void> })
      .releasePostgresConnection;
    await (failure && release ? release.call(runner, failure) : runner.release());
  }
}
