import { holdTransaction } from '../transaction/held-transaction';
import { transactionSourceOf } from '../transaction/transaction-source.registry';
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
 * Takes (scope, key) for a request with `fingerprint`: over the store's fast path when it has one and the built-in
 * transactions are used (PostgreSQL: `IdempotencyStore.begin`), else in a held transaction (`beginHeld`).
 */
export function beginAttempt(
  store: IdempotencyStore,
  config: IdempotencyStoreConfig,
  scope: string,
  key: string,
  fingerprint: string,
  limits: IdempotencyWaitLimits = DEFAULT_IDEMPOTENCY_OPTIONS,
): Promise<IdempotencyBegin> {
  if (store.begin && !transactionSourceOf(config.dataSource)) return store.begin(scope, key, fingerprint, limits);
  return beginHeld(store, config, scope, key, fingerprint, limits);
}

/**
 * Takes (scope, key) in a transaction that the transaction runner holds open (`holdTransaction`: the built-in
 * runner's, or the plugged-in source's, e.g. `transactions: 'cls'`): the store takes the key through the
 * transaction's manager; a stored record or a key in flight rolls it back at once; else the handler runs in it
 * (`attempt.run`), and `commit()` inserts the record through the same manager before the runner commits. The
 * store never begins or ends the transaction; a lock of its own that outlives the transaction is given back once
 * the transaction has ended (`onEnd`).
 */
export async function beginHeld(
  store: IdempotencyStore,
  config: IdempotencyStoreConfig,
  scope: string,
  key: string,
  fingerprint: string,
  limits: IdempotencyWaitLimits,
): Promise<IdempotencyBegin> {
  const held = await holdTransaction(config.dataSource, {
    connect: (runner) => connectWithin(runner, limits.connectionTimeout),
  });
  let take;
  try {
    take = await store.takeIn(held.context.manager, scope, key, fingerprint, limits);
  } catch (error) {
    await held.rollback();
    throw error;
  }
  if (take.kind !== 'acquired') {
    await held.rollback();
    return take;
  }
  held.onEnd(take.release);
  const { expired } = take;
  const end = async (record: NewIdempotencyRecord | null): Promise<boolean> => {
    try {
      if (record) await store.insertIn(held.context.manager, scope, key, record, expired, limits);
    } catch (error) {
      await held.rollback();
      if (isKeyViolation(config, error)) return false;
      throw error;
    }
    try {
      await held.commit();
    } catch (error) {
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
