import type { EntityManager } from 'typeorm';
import { sharesOneConnection } from './transaction-runner';
import type { OutboxTransactionContext } from './transaction.types';

/**
 * Commits what `write` writes while the caller's transaction (`context`) stays open and goes on — a step's result,
 * `idempotentStep()`. Where the DataSource has a pool, on a connection of its own (one short autocommit write; the
 * caller's transaction keeps its locks). Where it has one connection (SQLite), that connection is the caller's
 * transaction's: `write` runs in it, which is committed and begun again — so the caller must allow this only while
 * its transaction holds no write of its own, which would be committed early with it.
 */
export async function commitEarly(
  context: OutboxTransactionContext,
  write: (manager: EntityManager) => Promise<void>,
): Promise<void> {
  const { dataSource, manager } = context;
  if (sharesOneConnection(dataSource)) {
    await write(manager);
    await manager.query('COMMIT');
    await manager.query('BEGIN TRANSACTION');
    return;
  }
  const runner = dataSource.createQueryRunner();
  try {
    await write(runner.manager);
  } finally {
    await runner.release();
  }
}
