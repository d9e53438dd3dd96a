import { AsyncLocalStorage } from 'node:async_hooks';
import type { DataSource, EntityManager } from 'typeorm';

/** What the ambient transaction carries: its DataSource, its EntityManager, and work to run after commit. */
export interface OutboxTransactionContext {
  readonly dataSource: DataSource;
  readonly manager: EntityManager;
  /** Callbacks run once the transaction has committed (never after a rollback). */
  readonly afterCommit: Array<() => void>;
}

const storage = new AsyncLocalStorage<OutboxTransactionContext>();

/** The transaction that the current async call chain runs in, if any. */
export function currentTransaction(): OutboxTransactionContext | undefined {
  return storage.getStore();
}

/** Runs `work` with `context` as the ambient transaction. */
export function runInTransactionContext<T>(context: OutboxTransactionContext, work: () => T): T {
  return storage.run(context, work);
}

/** Runs `work` with no ambient transaction (background work must never join a caller's transaction). */
export function outsideTransactionContext<T>(work: () => T): T {
  return storage.exit(work);
}
