import { holdTransaction } from '../transaction/held-transaction';
import {
  IdempotencyBegin,
  IdempotencyStore,
  IdempotencyStoreConfig,
  isKeyViolation,
  NewIdempotencyRecord,
} from './idempotency-store';
import { connectWithin, IdempotencyWaitLimits } from './stores/connection-wait';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from './idempotency.options';

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
