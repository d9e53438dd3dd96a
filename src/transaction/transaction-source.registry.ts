import type { DataSource } from 'typeorm';
import type { OutboxTransactionContext, OutboxTransactionSource } from './transaction.types';

/** The transaction sources plugged in per DataSource (`transactions` option); none means the built-in one. */
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
