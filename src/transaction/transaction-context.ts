import { AsyncLocalStorage } from 'node:async_hooks';
import type { DataSource } from 'typeorm';
import { currentFromPluggedSources, transactionSourceOf } from './transaction-source.registry';
import type { OutboxTransactionContext } from './transaction.types';

const storage = new AsyncLocalStorage<OutboxTransactionContext>();

/**
 * The transaction that the current async call chain runs in, if any: of `dataSource` when given (asking the
 * transaction source plugged in for it, e.g. nestjs-cls), else the built-in one or any plugged-in source's.
 */
export function currentTransaction(dataSource?: DataSource): OutboxTransactionContext | undefined {
  if (dataSource) {
    const source = transactionSourceOf(dataSource);
    if (source) return source.current(dataSource);
    const context = storage.getStore();
    return context?.dataSource === dataSource ? context : undefined;
  }
  return storage.getStore() ?? currentFromPluggedSources();
}

/** Runs `work` with `context` as the ambient transaction. */
export function runInTransactionContext<T>(context: OutboxTransactionContext, work: () => T): T {
  return storage.run(context, work);
}

/** Runs `work` with no ambient transaction (background work must never join a caller's transaction). */
export function outsideTransactionContext<T>(work: () => T): T {
  return storage.exit(work);
}
