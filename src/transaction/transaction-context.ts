import type { DataSource } from 'typeorm';
import { currentFromPluggedSources, transactionSourceOf } from './transaction-source.registry';
import type { OutboxTransactionContext } from './transaction.types';
import { contextSlot, outsideEveryContextSlot } from '../util/context-slots';

/** One open transaction and the one it was opened in (of another DataSource: several outboxes may nest). */
interface TransactionFrame {
  context: OutboxTransactionContext;
  outer?: TransactionFrame;
}

/** The ambient transaction, in the library's one async context (`context-slots.ts`). */
const storage = contextSlot<TransactionFrame>('outbox transaction');

/**
 * The transaction that the current async call chain runs in, if any: of `dataSource` when given (asking the
 * transaction source plugged in for it, e.g. nestjs-cls), else the built-in one or any plugged-in source's.
 */
export function currentTransaction(dataSource?: DataSource): OutboxTransactionContext | undefined {
  if (dataSource) {
    const source = transactionSourceOf(dataSource);
    if (source) return source.current(dataSource);
    for (let frame = storage.get(); frame; frame = frame.outer) {
      if (frame.context.dataSource === dataSource) return frame.context;
    }
    return undefined;
  }
  return storage.get()?.context ?? currentFromPluggedSources();
}

/**
 * Runs `work` with `context` as the ambient transaction. A transaction of another DataSource that was ambient stays
 * current for its own DataSource inside `work` (a billing transaction opened inside a default one, and back).
 */
export function runInTransactionContext<T>(context: OutboxTransactionContext, work: () => T): T {
  return storage.run({ context, outer: storage.get() }, work);
}

/**
 * Runs `work` with no ambient transaction (background work must never join a caller's transaction), nor anything
 * else of the caller's async context.
 */
export function outsideTransactionContext<T>(work: () => T): T {
  return outsideEveryContextSlot(work);
}
