import type { ModuleRef } from '@nestjs/core';
import type { DataSource, EntityManager } from 'typeorm';
import { OutboxConfigurationError } from '../errors';
import { runAfterCommit, takeTurn } from './transaction-runner';
import type { OutboxTransactionContext, OutboxTransactionOptions, OutboxTransactionSource } from './transaction.types';

/** The part of `@nestjs-cls/transactional`'s `TransactionHost` (TypeORM adapter) this source uses. */
interface TransactionHostLike {
  readonly tx: EntityManager;
  isTransactionActive(): boolean;
  withTransaction<R>(options: Record<string, unknown>, fn: () => Promise<R>): Promise<R>;
}

/** Options of `ClsTransactionSource`. */
export interface ClsTransactionSourceOptions {
  /**
   * The `connectionName` given to `ClsPluginTransactional`, when the app registers several of them.
   * @default the default (unnamed) TransactionHost
   */
  connectionName?: string;
}

/**
 * Joins the transactions of `@nestjs-cls/transactional` with its TypeORM adapter: `emit()`, `OutboxService.manager`
 * and `@Idempotent()` use `TransactionHost.tx` while a transaction is active (opened by `@Transactional()`,
 * `TransactionHost.withTransaction()` or `OutboxService.transaction()`), and `OutboxService.transaction()` opens
 * (or joins) one through the TransactionHost. The package is loaded only when this source is configured:
 * `OutboxModule.forRoot({ transactions: 'cls' })` or `transactions: new ClsTransactionSource({ connectionName })`.
 *
 * Commits of transactions opened by `OutboxService.transaction()` wake the local publisher at once; rows written
 * inside `@Transactional()` methods are picked up by the next poll (`publisher.pollingInterval`).
 */
export class ClsTransactionSource implements OutboxTransactionSource {
  readonly name = 'cls';
  private host?: TransactionHostLike;
  /** One context per transaction (keyed by its EntityManager), so after-commit callbacks are collected once. */
  private readonly contexts = new WeakMap<EntityManager, OutboxTransactionContext>();

  constructor(protected readonly options: ClsTransactionSourceOptions = {}) {}

  async init(_dataSource: DataSource, moduleRef: ModuleRef): Promise<void> {
    let module: { getTransactionHostToken(connectionName?: string): symbol | Function };
    try {
      const loaded = (await import('@nestjs-cls/transactional')) as unknown as typeof module & {
        default?: typeof module;
      };
      // From the ES module build, a CommonJS package's exports may sit on `default` only.
      module = typeof loaded.getTransactionHostToken === 'function' ? loaded : loaded.default!;
    } catch (error) {
      throw new OutboxConfigurationError(
        "OutboxModule option `transactions: 'cls'` needs the packages nestjs-cls, @nestjs-cls/transactional and " +
          `@nestjs-cls/transactional-adapter-typeorm (${(error as Error).message}). Install them, or leave \`transactions\` out.`,
      );
    }
    try {
      this.host = moduleRef.get<TransactionHostLike>(module.getTransactionHostToken(this.options.connectionName), {
        strict: false,
      });
    } catch {
      const named = this.options.connectionName ? ` with connectionName '${this.options.connectionName}'` : '';
      throw new OutboxConfigurationError(
        `OutboxModule option \`transactions: 'cls'\` found no TransactionHost${named}. Register ClsModule.forRoot({ plugins: ` +
          '[new ClsPluginTransactional({ adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }) })] }) ' +
          'in the app (with the same connectionName), or leave `transactions` out to use the built-in transactions.',
      );
    }
  }

  current(dataSource: DataSource): OutboxTransactionContext | undefined {
    const host = this.transactionHost();
    if (!host.isTransactionActive()) return undefined;
    const manager = host.tx;
    if (manager.connection !== dataSource) return undefined;
    let context = this.contexts.get(manager);
    if (!context) {
      context = { dataSource, manager, afterCommit: [] };
      this.contexts.set(manager, context);
    }
    return context;
  }

  async run<T>(
    dataSource: DataSource,
    work: (manager: EntityManager) => Promise<T>,
    options: OutboxTransactionOptions,
  ): Promise<T> {
    const outer = this.current(dataSource);
    if (outer) return work(outer.manager);
    const host = this.transactionHost();
    let context: OutboxTransactionContext | undefined;
    const result = await takeTurn(dataSource, () =>
      host.withTransaction(options.isolationLevel ? { isolationLevel: options.isolationLevel } : {}, () => {
        context = this.current(dataSource);
        if (!context) {
          throw new OutboxConfigurationError(
            "OutboxModule option `transactions: 'cls'`: the TransactionHost opened a transaction on another DataSource than the " +
              "outbox's. Give TransactionalAdapterTypeOrm the outbox's DataSource token, or set `connectionName`.",
          );
        }
        return work(context.manager);
      }),
    );
    if (context) runAfterCommit(context);
    return result;
  }

  private transactionHost(): TransactionHostLike {
    if (!this.host) {
      throw new OutboxConfigurationError(
        'ClsTransactionSource was used before OutboxModule initialized it. Use it only after app.init().',
      );
    }
    return this.host;
  }
}
