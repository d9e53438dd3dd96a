import { Inject, Injectable, Logger, OnModuleInit, Optional } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { RpcServers } from '../transports/consumer-ack-mode';
import { OutboxCleanupRegistry } from '../scheduling/outbox-cleanup.registry';
import { OutboxRelayRegistry } from '../scheduling/outbox-relay.registry';
import { OUTBOX_OPTIONS } from '../outbox.constants';
import type { InboxTarget } from './message-inbox';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { OutboxDatabase } from '../dialects/outbox-database';
import { checkEntitiesRegistered } from '../schema/outbox-entities.check';
import type { SqlOutboxDialect } from '../dialects/sql-dialect.base';
import { StepJournal } from './steps/step-journal';
import type {
  IdempotencyStore,
  IdempotencyStoreConfig,
  IdempotencyWaitLimits,
  StoredIdempotencyRecord,
} from '../dialects/key-store';
import { beginAttempt, type IdempotencyBegin, RunningKeys } from './held-attempt';
import { driverTimeoutWarning } from '../dialects/driver-timeouts';
import { resolveIdempotencyStore } from '../dialects/resolve-key-store';
import { loadClassTransformer } from './http-request';
import { runInTransaction, runOnConnection } from '../transaction/transaction-runner';
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
  /** The keys this process is running right now: a duplicate is answered 409 without a connection. */
  private readonly running = new RunningKeys();

  constructor(
    protected readonly database: OutboxDatabase,
    @Inject(OUTBOX_OPTIONS) options: ResolvedOutboxOptions,
    @Optional() protected readonly cleanup?: OutboxCleanupRegistry,
    @Optional() modules?: ModulesContainer,
    @Optional() relays?: OutboxRelayRegistry,
  ) {
    this.defaults = options.idempotency ?? DEFAULT_IDEMPOTENCY_OPTIONS;
    this.rpcServers = new RpcServers(modules);
    const history = { publisher: options.publisher.instanceId, limit: options.retry.historyLimit };
    // A hint only (polling finds the row too); no relay is registered when the outbox was not built by Nest.
    const wake = () => {
      try {
        relays?.relay.wake();
      } catch {
        // no relay: the row waits for a publisher's poll
      }
    };
    this.inbox = { database, history, wake };
  }

  /** The app's microservice servers: how each RabbitMQ consumer acks (`manualAck` derived or checked from it). */
  readonly rpcServers: RpcServers;

  /** Where a failed consumer's message is stored as an inbox row (`failed-message-inbox.ts`). */
  readonly inbox: InboxTarget;

  /** The name of the DataSource its records are written to (`'default'` for the default one). */
  get dataSourceName(): string {
    return this.database.name;
  }

  async onModuleInit(): Promise<void> {
    await loadClassTransformer();
    const { dataSource, entities } = this.database;
    if (!dataSource.hasMetadata(entities.idempotencyRecord)) return;
    const warning = driverTimeoutWarning(dataSource, this.database.name);
    if (warning) new Logger('OutboxModule').warn(warning);
    this.cleanup?.register({ name: IDEMPOTENCY_CLEANUP_TASK, deleteBatch: (limit) => this.deleteExpired(limit) });
    if (!dataSource.hasMetadata(entities.idempotencyStep)) return;
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
   * Takes (scope, key) for a call with `fingerprint` (a request, a message, `once()`), in a transaction the
   * transaction runner holds open (the built-in one, or the plugged-in source's, e.g. `transactions: 'cls'`):
   * `held-attempt.ts`. A request's key this process is running is answered in flight at once; the waits are bounded
   * by `limits`. `message` (a delivery, `once()`): a redelivery may wait for the first delivery, at most
   * `lockTimeout`.
   */
  begin(
    scope: string,
    key: string,
    fingerprint: string,
    limits: IdempotencyWaitLimits = this.defaults,
    message?: { ttl: number },
  ): Promise<IdempotencyBegin> {
    const take = () => beginAttempt(this.store, this.config!, scope, key, fingerprint, limits, message);
    // A message needs no answer without a connection: the database decides (and may let a redelivery wait).
    return message ? take() : this.running.take(scope, key, fingerprint, take);
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
    return runOnConnection(this.database.dataSource, (manager) => this.store.deleteExpired(manager, limit));
  }

  /** The committed record of (scope, key), read outside any transaction of the caller; undefined when none. */
  read(scope: string, key: string): Promise<StoredIdempotencyRecord | undefined> {
    return runOnConnection(this.database.dataSource, (manager) => this.store.read(manager, scope, key));
  }

  protected createJournal(): StepJournal {
    const { dataSource, dialect, name, entities } = this.database;
    checkEntitiesRegistered(dataSource, name, entities, ['idempotencyStep']);
    const table = dataSource.getMetadata(entities.idempotencyStep).tablePath;
    return new StepJournal(dataSource, dialect as unknown as SqlOutboxDialect, table);
  }

  protected createStore(): IdempotencyStore {
    const { dataSource, dialect, name, entities } = this.database;
    checkEntitiesRegistered(dataSource, name, entities, ['idempotencyRecord']);
    const table = dataSource.getMetadata(entities.idempotencyRecord).tablePath;
    const config = (this.config = { dataSource, dialect, table });
    return resolveIdempotencyStore(config);
  }
}
