import type { ModuleRef } from '@nestjs/core';
import type { DataSource, EntityManager } from 'typeorm';
import type { IsolationLevel } from 'typeorm/driver/types/IsolationLevel';

/*
 * The transaction contract: what the ambient transaction carries, the options of one transaction, and the
 * interface of a transaction source. Types only, so the context, the runner, the sources and the module options
 * can all depend on it without depending on each other.
 */

/** What the ambient transaction carries: its DataSource, its EntityManager, and work to run after commit. */
export interface OutboxTransactionContext {
  readonly dataSource: DataSource;
  readonly manager: EntityManager;
  /** Callbacks run once the transaction has committed (never after a rollback). */
  readonly afterCommit: Array<() => void>;
}

/**
 * One of the library's own statements with its values: `$1`, `$2`… on PostgreSQL, `?` on the other databases.
 * Strings, numbers and null only (statements the runner sends with `BEGIN` or `COMMIT` carry their values as
 * literals written by the driver's own escaping).
 */
export interface OutboxStatement {
  readonly sql: string;
  readonly params?: readonly unknown[];
}

/** Options of one transaction. */
export interface OutboxTransactionOptions {
  /** Isolation level of a new transaction (ignored when joining an outer one). @default the database's default */
  isolationLevel?: IsolationLevel;
}

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
  run<T>(
    dataSource: DataSource,
    work: (manager: EntityManager) => Promise<T>,
    options: OutboxTransactionOptions,
  ): Promise<T>;
}
