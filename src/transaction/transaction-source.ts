import type { ModuleRef } from '@nestjs/core';
import type { DataSource, EntityManager } from 'typeorm';
import type { OutboxTransactionContext } from './transaction-context';
import type { OutboxTransactionOptions } from './transaction-runner';

/**
 * Where the ambient transaction of a DataSource comes from: the one place that `emit()`, `OutboxService.manager`,
 * `OutboxService.transaction()` (and everything built on them, such as `@Idempotent()`) ask. The built-in source
 * keeps the transaction in the library's own AsyncLocalStorage; `ClsTransactionSource` reads and opens
 * `@nestjs-cls/transactional`'s transactions. Implement this interface to plug in another transaction manager.
 */
export interface OutboxTransactionSource {
  /** Name shown in messages, e.g. 'cls'. */
  readonly name: string;
  /**
   * Called once at startup (in `onModuleInit`), before the first transaction: may load optional packages and
   * look up providers through `moduleRef` (non-strict, so any module's providers are found).
   */
  init?(dataSource: DataSource, moduleRef: ModuleRef): void | Promise<void>;
  /** The caller's transaction on `dataSource`, or `undefined` when there is none. */
  current(dataSource: DataSource): OutboxTransactionContext | undefined;
  /**
   * Runs `work` in a transaction of `dataSource`, joining the caller's one when there is one, and runs the
   * context's `afterCommit` callbacks after a commit of a transaction it opened.
   */
  run<T>(dataSource: DataSource, work: (manager: EntityManager) => Promise<T>, options: OutboxTransactionOptions): Promise<T>;
}

const sources = new Map<DataSource, OutboxTransactionSource>();

/** Makes `source` the transaction source of `dataSource` (until `releaseTransactionSource`). */
export function useTransactionSource(dataSource: DataSource, source: OutboxTransactionSource): void {
  sources.set(dataSource, source);
}

/** Goes back to the built-in source for `dataSource`. */
export function releaseTransactionSource(dataSource: DataSource, source: OutboxTransactionSource): void {
  if (sources.get(dataSource) === source) sources.delete(dataSource);
}

/** The source plugged in for `dataSource`, or `undefined` for the built-in one. */
export function transactionSourceOf(dataSource: DataSource): OutboxTransactionSource | undefined {
  return sources.get(dataSource);
}

/** The first transaction any plugged-in source reports (for callers that do not name a DataSource). */
export function currentFromPluggedSources(): OutboxTransactionContext | undefined {
  for (const [dataSource, source] of sources) {
    const context = source.current(dataSource);
    if (context) return context;
  }
  return undefined;
}
