import { holdTransaction } from '../transaction/held-transaction';
import type { OutboxTransactionContext } from '../transaction/transaction.types';
import {
  IdempotencyStore,
  IdempotencyStoreConfig,
  IdempotencyWaitLimits,
  isKeyViolation,
  NewIdempotencyRecord,
  StoredIdempotencyRecord,
} from '../dialects/key-store';
import { connectWithin } from '../transaction/connection-wait';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from './idempotency.options';
import type { Logger } from '@nestjs/common';
import { describeError } from '../util/describe-error';

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
