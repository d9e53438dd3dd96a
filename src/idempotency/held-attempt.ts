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
