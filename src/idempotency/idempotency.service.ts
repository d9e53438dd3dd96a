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
import {
  IdempotencyStore,
  IdempotencyStoreConfig,
  IdempotencyWaitLimits,
  isKeyViolation,
  NewIdempotencyRecord,
  StoredIdempotencyRecord,
} from '../dialects/key-store';
import { driverTimeoutWarning } from '../dialects/driver-timeouts';
import { resolveIdempotencyStore } from '../dialects/resolve-key-store';
import { loadClassTransformer } from './http-request';
import { runInTransaction, runOnConnection } from '../transaction/transaction-runner';
import { DEFAULT_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyDefaults } from './idempotency.options';
import { connectWithin, holdTransaction } from '../transaction/held-transaction';
import type { OutboxTransactionContext } from '../transaction/transaction.types';
import { describeError } from '../util/describe-error';

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

  /** Where a failed consumer's message is stored as an inbox row (`message-inbox.ts`). */
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
   * `beginAttempt()` below. A request's key this process is running is answered in flight at once; the waits are bounded
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

/**
 * The transaction of the request that won the key: the handler runs with `context` ambient (so
 * `OutboxService.manager`, `transaction()` and `emit()` join it); then exactly one of `commit()` / `rollback()`.
 */
export interface IdempotencyAttempt {
  readonly context: OutboxTransactionContext;
  /** Runs `work` in the async context where the transaction is ambient (the handler runs through this). */
  run<T>(work: () => T): T;
  /**
   * Writes the record and commits, then runs the after-commit callbacks. Resolves false (everything rolled back)
   * when the unique constraint shows that another request committed the same key first.
   */
  commit(record: NewIdempotencyRecord): Promise<boolean>;
  /** Commits the handler's effect without a record (a response that cannot be replayed). */
  commitWithoutRecord(): Promise<void>;
  /** Rolls everything back, the key included. */
  rollback(): Promise<void>;
}

/** Outcome of trying to take a key. */
export type IdempotencyBegin =
  | { kind: 'stored'; record: StoredIdempotencyRecord }
  /** Another request holds the key right now; `sameRequest` is false when its fingerprint differs from this one's. */
  | { kind: 'in-flight'; sameRequest: boolean }
  | { kind: 'acquired'; attempt: IdempotencyAttempt };

/**
 * Takes (scope, key) for a call with `fingerprint` (`message` set for a delivery or `once()`, which may wait for a
 * duplicate in flight: see `IdempotencyStore.take`) in a transaction the transaction runner holds open
 * (`holdTransaction`: the built-in runner's, or the plugged-in source's, e.g. `transactions: 'cls'`): the store's
 * statements for the key open it (with BEGIN, on PostgreSQL); a stored record or a key in flight rolls it back at
 * once; else the handler runs in it (`attempt.run`), and `commit()` writes the record as the runner commits (with
 * COMMIT, on PostgreSQL). The store never begins or ends the transaction; a lock of its own that outlives the
 * transaction is given back once the transaction has ended, however it ended (`afterEnd`). Every wait is bounded by `limits`: the pooled
 * connection by `connectionTimeout`, the library's lock waits by `lockTimeout`, its round trips by `statementTimeout`.
 */
export async function beginAttempt(
  store: IdempotencyStore,
  config: IdempotencyStoreConfig,
  scope: string,
  key: string,
  fingerprint: string,
  limits: IdempotencyWaitLimits = DEFAULT_IDEMPOTENCY_OPTIONS,
  message?: { ttl: number },
): Promise<IdempotencyBegin> {
  const taking = await store.take(scope, key, fingerprint, limits, message);
  let held;
  try {
    held = await holdTransaction(config.dataSource, {
      connect: (runner) => connectWithin(runner, limits.connectionTimeout),
      first: taking.statements,
      afterEnd: taking.release,
      roundTripTimeout: limits.statementTimeout,
    });
  } catch (error) {
    if (taking.inFlight?.(error)) return { kind: 'in-flight', sameRequest: true };
    throw error;
  }
  let take;
  try {
    take = taking.outcome(held.opened);
  } catch (error) {
    await held.rollback();
    throw error;
  }
  if (take.kind === 'stored') {
    await held.rollback();
    return { kind: 'stored', record: take.record };
  }
  if (take.kind === 'in-flight') {
    await held.rollback();
    return { kind: 'in-flight', sameRequest: take.sameRequest };
  }
  const taken = take;
  const end = async (record: NewIdempotencyRecord | null): Promise<boolean> => {
    try {
      await held.commit(record ? await store.record(scope, key, record, taken, limits) : []);
    } catch (error) {
      await held.rollback(); // when the statements could not even be written (a commit that failed has rolled back)
      if (record && isKeyViolation(config, error)) return false;
      throw error;
    }
    return true;
  };
  return {
    kind: 'acquired',
    attempt: {
      context: held.context,
      run: held.run,
      commit: (record) => end(record),
      commitWithoutRecord: async () => {
        await end(null);
      },
      rollback: held.rollback,
    },
  };
}

/**
 * The keys this process holds right now (taken, not yet committed or rolled back), with the fingerprint of the
 * request holding each. A duplicate of one of them is answered in flight (409, or 422 for a different request) at
 * once, as the database's lock would answer it, but without waiting for a connection: when every pooled connection
 * is held by long handlers, a client's retry of a key still in use learns that it is in use instead of getting
 * "database busy". Keys held by other processes are still decided by the database.
 */
export class RunningKeys {
  private readonly held = new Map<string, { fingerprint: string }>();

  /** Answers a key held here in flight; else runs `take` and remembers an acquired key until its attempt ends. */
  async take(
    scope: string,
    key: string,
    fingerprint: string,
    take: () => Promise<IdempotencyBegin>,
  ): Promise<IdempotencyBegin> {
    const id = `${scope}\u0000${key}`;
    const holder = this.held.get(id);
    if (holder !== undefined) return { kind: 'in-flight', sameRequest: holder.fingerprint === fingerprint };
    const begun = await take();
    if (begun.kind !== 'acquired') return begun;
    const mine = { fingerprint };
    this.held.set(id, mine);
    // Forgets only its own entry: the next holder may have taken the key as soon as this commit released it.
    const forget = () => {
      if (this.held.get(id) === mine) this.held.delete(id);
    };
    return { kind: 'acquired', attempt: this.tracked(begun.attempt, forget) };
  }

  /** `attempt`, forgetting the key once it commits or rolls back (whatever the outcome). */
  private tracked(attempt: IdempotencyAttempt, forget: () => void): IdempotencyAttempt {
    const ending =
      <A extends unknown[], R>(end: (...args: A) => Promise<R>) =>
      async (...args: A): Promise<R> => {
        try {
          return await end(...args);
        } finally {
          forget();
        }
      };
    return {
      context: attempt.context,
      run: (work) => attempt.run(work),
      commit: ending((record) => attempt.commit(record)),
      commitWithoutRecord: ending(() => attempt.commitWithoutRecord()),
      rollback: ending(() => attempt.rollback()),
    };
  }
}

/**
 * Rolls an attempt back after its handler failed. A rollback that fails too (the connection is gone) is logged as a
 * warning and not thrown, so the caller answers with the handler's error rather than the rollback's.
 */
export async function rollbackQuietly(attempt: IdempotencyAttempt, logger: Pick<Logger, 'warn'>): Promise<void> {
  try {
    await attempt.rollback();
  } catch (error) {
    logger.warn(`Rollback failed: ${describeError(error)}`);
  }
}
