import { Inject, Injectable, OnModuleInit, Optional } from '@nestjs/common';
import { OutboxCleanupRegistry } from '../scheduling/outbox-cleanup.registry';
import { OutboxConfigurationError } from '../errors';
import { OUTBOX_OPTIONS } from '../outbox.constants';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { OutboxDatabase } from '../dialects/outbox-database';
import { IdempotencyRecord } from '../schema/idempotency-record.entity';
import { IdempotencyStep } from '../schema/idempotency-step.entity';
import type { SqlOutboxDialect } from '../dialects/sql-dialect.base';
import { StepJournal } from './steps/step-journal';
import type { IdempotencyBegin, IdempotencyStore, IdempotencyStoreConfig } from './idempotency-store';
import { beginJoined } from './joined-attempt';
import { resolveIdempotencyStore } from './stores/resolve-idempotency-store';
import { loadClassTransformer } from './class-transformer.loader';
import { runInTransaction } from '../transaction/transaction-runner';
import { transactionSourceOf } from '../transaction/transaction-source.registry';
import { DEFAULT_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyDefaults } from './idempotency.options';

/** Name of the cleanup task that deletes expired records. */
export const IDEMPOTENCY_CLEANUP_TASK = 'idempotency-keys';
/** Name of the cleanup task that deletes expired step results. */
export const IDEMPOTENCY_STEPS_CLEANUP_TASK = 'idempotency-steps';

/**
 * The idempotency records of the outbox's DataSource: the module-wide defaults, the database's store (created on
 * first use, so apps that never use `@Idempotent()` need not register the entity) and the cleanup of expired
 * records, registered with the scheduled cleanup.
 */
@Injectable()
export class IdempotencyService implements OnModuleInit {
  readonly defaults: ResolvedIdempotencyDefaults;
  private created?: IdempotencyStore;
  private journal?: StepJournal;
  private config?: IdempotencyStoreConfig;

  constructor(
    protected readonly database: OutboxDatabase,
    @Inject(OUTBOX_OPTIONS) options: ResolvedOutboxOptions,
    @Optional() protected readonly cleanup?: OutboxCleanupRegistry,
  ) {
    this.defaults = options.idempotency ?? DEFAULT_IDEMPOTENCY_OPTIONS;
  }

  /** The name of the DataSource its records are written to (`'default'` for the default one). */
  get dataSourceName(): string {
    return this.database.name;
  }

  async onModuleInit(): Promise<void> {
    await loadClassTransformer();
    if (!this.database.dataSource.hasMetadata(IdempotencyRecord)) return;
    this.cleanup?.register({ name: IDEMPOTENCY_CLEANUP_TASK, deleteBatch: (limit) => this.store.deleteExpired(limit) });
    if (!this.database.dataSource.hasMetadata(IdempotencyStep)) return;
    this.cleanup?.register({ name: IDEMPOTENCY_STEPS_CLEANUP_TASK, deleteBatch: (n) => this.steps.deleteExpired(n) });
  }

  /** The store of the outbox's database. */
  get store(): IdempotencyStore {
    return (this.created ??= this.createStore());
  }

  /** The recorded step results (`idempotentStep()`) of the outbox's database, created on first use. */
  get steps(): StepJournal {
    return (this.journal ??= this.createJournal());
  }

  /**
   * Takes (scope, key) for a request with `fingerprint`: in a transaction of the store's own when the built-in
   * transactions are used, else inside the plugged-in transaction source's (e.g. `transactions: 'cls'`).
   */
  begin(scope: string, key: string, fingerprint: string): Promise<IdempotencyBegin> {
    const { dataSource } = this.database;
    const source = transactionSourceOf(dataSource);
    const store = this.store;
    if (!source) return store.begin(scope, key, fingerprint);
    return beginJoined(source, dataSource, store, this.config!, scope, key, fingerprint);
  }

  /**
   * Takes (scope, key) for a message: like `begin()`, but a redelivery racing the first delivery may wait for it
   * (no prompt answer is needed), which lets the store write the key first in one statement (`store.claim`).
   */
  claim(scope: string, key: string, fingerprint: string, ttl: number): Promise<IdempotencyBegin> {
    const store = this.store;
    if (!store.claim || transactionSourceOf(this.database.dataSource)) return this.begin(scope, key, fingerprint);
    return store.claim(scope, key, fingerprint, ttl);
  }

  /**
   * Runs `work` in a transaction of the outbox's DataSource without a record (a message that carries no id), through
   * the plugged-in transaction source when there is one. Commits when `work` resolves, rolls back when it throws.
   */
  transaction<T>(work: () => Promise<T>): Promise<T> {
    return runInTransaction(this.database.dataSource, () => work());
  }

  /** Deletes up to `limit` expired records (what the scheduled cleanup calls); resolves with the number deleted. */
  deleteExpired(limit = 1000): Promise<number> {
    return this.store.deleteExpired(limit);
  }

  protected createJournal(): StepJournal {
    const { dataSource, dialect, name } = this.database;
    if (!dataSource.hasMetadata(IdempotencyStep)) {
      throw new OutboxConfigurationError(
        `idempotentStep() needs the IdempotencyStep entity in the DataSource '${name}'. Set \`autoLoadEntities: true\` ` +
          'in TypeOrmModule.forRoot(), or add IdempotencyStep to its `entities` (and run the migration ' +
          'CreateIdempotencySteps1765411200000, part of OUTBOX_MIGRATIONS).',
      );
    }
    const table = dataSource.getMetadata(IdempotencyStep).tablePath;
    return new StepJournal(dataSource, dialect as unknown as SqlOutboxDialect, table);
  }

  protected createStore(): IdempotencyStore {
    const { dataSource, dialect, name } = this.database;
    if (!dataSource.hasMetadata(IdempotencyRecord)) {
      throw new OutboxConfigurationError(
        `@Idempotent() needs the IdempotencyRecord entity in the DataSource '${name}'. Set \`autoLoadEntities: true\` in ` +
          'TypeOrmModule.forRoot(), or add IdempotencyRecord to its `entities` (and run the idempotency migration).',
      );
    }
    const config = (this.config = { dataSource, dialect, table: dataSource.getMetadata(IdempotencyRecord).tablePath });
    return resolveIdempotencyStore(config);
  }
}
