import { AsyncResource } from 'node:async_hooks';
import type { DataSource } from 'typeorm';
import { currentTransaction } from '../transaction/transaction-context';
import type { OutboxTransactionSource } from '../transaction/transaction.types';
import {
  IdempotencyBegin,
  IdempotencyStore,
  IdempotencyStoreConfig,
  isKeyViolation,
  NewIdempotencyRecord,
} from './idempotency-store';

/** Thrown inside the source's transaction to roll it back on purpose. */
class Abort extends Error {}

/**
 * Takes a key inside a transaction of a plugged-in transaction source (e.g. `transactions: 'cls'`), so that the
 * handler's `@Transactional()` code, `OutboxService.manager` and `emit()` all see one transaction. The source opens
 * (or joins) the transaction and commits it; the handler runs in the source's async context (`attempt.run`), and
 * the record is inserted at the end of the same transaction.
 */
export function beginJoined(
  source: OutboxTransactionSource,
  dataSource: DataSource,
  store: IdempotencyStore,
  config: IdempotencyStoreConfig,
  scope: string,
  key: string,
  fingerprint: string,
): Promise<IdempotencyBegin> {
  return new Promise<IdempotencyBegin>((resolveBegin, rejectBegin) => {
    let decide!: (decision: { record: NewIdempotencyRecord | null } | 'rollback') => void;
    const decision = new Promise<{ record: NewIdempotencyRecord | null } | 'rollback'>((resolve) => (decide = resolve));
    let begun = false;

    const outcome = source.run(
      dataSource,
      async (manager) => {
        const take = await store.takeIn(manager, scope, key, fingerprint);
        if (take.kind !== 'acquired') {
          begun = true;
          resolveBegin(take);
          throw new Abort();
        }
        try {
          const context = currentTransaction(dataSource) ?? { dataSource, manager, afterCommit: [] };
          const run = AsyncResource.bind(<T>(work: () => T): T => work());
          begun = true;
          resolveBegin({
            kind: 'acquired',
            attempt: {
              context,
              run,
              commit: async (record) => {
                decide({ record });
                return settled();
              },
              commitWithoutRecord: async () => {
                decide({ record: null });
                if (!(await settled())) throw new Error('unreachable: no record was written');
              },
              rollback: async () => {
                decide('rollback');
                await outcome.catch(() => undefined);
              },
            },
          });
          const chosen = await decision;
          if (chosen === 'rollback') throw new Abort();
          if (chosen.record) await store.insertIn(manager, scope, key, chosen.record, take.expired);
        } finally {
          await take.release();
        }
      },
      {},
    );

    /** Resolves true once committed, false when the unique constraint fired (rolled back); throws other errors. */
    const settled = () =>
      outcome.then(
        () => true,
        (error) => {
          if (isKeyViolation(config, error)) return false;
          throw error;
        },
      );

    outcome.catch((error) => {
      if (!begun) rejectBegin(error);
    });
  });
}
