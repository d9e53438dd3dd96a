import { AsyncResource } from 'node:async_hooks';
import type { DataSource, QueryRunner } from 'typeorm';
import { currentTransaction, runInTransactionContext } from './transaction-context';
import { runAfterCommit, sharesOneConnection, waitForTurn } from './transaction-runner';
import { transactionSourceOf } from './transaction-source.registry';
import type { OutboxTransactionContext, OutboxTransactionOptions, OutboxTransactionSource } from './transaction.types';

/**
 * A transaction held open for a caller that decides only at the end whether it commits: a key guard takes the key
 * in it, runs the handler in it, then writes the record and commits, or rolls back. Exactly one of `commit()` and
 * `rollback()` ends it.
 */
export interface HeldTransaction {
  readonly context: OutboxTransactionContext;
  /** Runs `work` where the transaction is ambient (`OutboxService.manager`, `transaction()` and `emit()` join it). */
  run<T>(work: () => T): T;
  /** Commits, then runs the `afterCommit` callbacks. When the commit fails, rolls back and rejects with its error. */
  commit(): Promise<void>;
  /** Rolls back. Never rejects: a transaction that cannot be rolled back ends with its connection. */
  rollback(): Promise<void>;
  /**
   * Work for the transaction's connection once the transaction has ended, before the connection goes back to the
   * pool (a named lock that outlives transactions, e.g. MySQL's `GET_LOCK`). Under a plugged-in source, which ends
   * the transaction itself, it runs just before that end. Its errors are ignored.
   */
  onEnd(work: () => Promise<void>): void;
}

/** Options of a held transaction. */
export interface HoldOptions extends OutboxTransactionOptions {
  /** Gets the pooled connection of a built-in transaction (to bound the wait, say); `runner.connect()` by default. */
  connect?: (runner: QueryRunner) => Promise<unknown>;
}

/**
 * Opens a held transaction of `dataSource`: a new one of the built-in runner's (never joined to the caller's; on
 * SQLite it holds the DataSource's turn until it ends), or one the plugged-in transaction source opens or joins
 * (e.g. `transactions: 'cls'`).
 */
export function holdTransaction(dataSource: DataSource, options: HoldOptions = {}): Promise<HeldTransaction> {
  const source = transactionSourceOf(dataSource);
  return source ? holdInSource(source, dataSource, options) : holdBuiltIn(dataSource, options);
}

async function holdBuiltIn(dataSource: DataSource, options: HoldOptions): Promise<HeldTransaction> {
  const endTurn = sharesOneConnection(dataSource) ? await waitForTurn(dataSource) : undefined;
  const runner = dataSource.createQueryRunner();
  try {
    await (options.connect ? options.connect(runner) : runner.connect());
    await runner.startTransaction(options.isolationLevel);
  } catch (error) {
    await runner.release().catch(() => undefined);
    endTurn?.();
    throw error;
  }
  const context: OutboxTransactionContext = { dataSource, manager: runner.manager, afterCommit: [] };
  const ending: Array<() => Promise<void>> = [];
  const finish = async () => {
    for (const work of ending.splice(0)) await work().catch(() => undefined);
    await runner.release().catch(() => undefined);
    endTurn?.();
  };
  const rollback = async () => {
    if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
  };
  return {
    context,
    run: (work) => runInTransactionContext(context, work),
    onEnd: (work) => void ending.push(work),
    commit: async () => {
      try {
        await runner.commitTransaction();
      } catch (error) {
        await rollback();
        await finish();
        throw error;
      }
      await finish();
      runAfterCommit(context);
    },
    rollback: async () => {
      await rollback();
      await finish();
    },
  };
}

/** Thrown inside the source's transaction to roll it back on purpose. */
class RollBack extends Error {}

/**
 * The source runs the transaction: its `run()` callback waits until the caller decides, so the transaction stays
 * open meanwhile, and the handler runs in the callback's async context (where the source keeps its transaction).
 */
function holdInSource(
  source: OutboxTransactionSource,
  dataSource: DataSource,
  options: HoldOptions,
): Promise<HeldTransaction> {
  return new Promise<HeldTransaction>((resolveHold, rejectHold) => {
    let decide!: (decision: 'commit' | 'rollback') => void;
    const decision = new Promise<'commit' | 'rollback'>((resolve) => (decide = resolve));
    const ending: Array<() => Promise<void>> = [];
    let held = false;

    const outcome = source.run(
      dataSource,
      async (manager) => {
        const context = currentTransaction(dataSource) ?? { dataSource, manager, afterCommit: [] };
        held = true;
        resolveHold({
          context,
          run: AsyncResource.bind(<T>(work: () => T): T => work()),
          onEnd: (work) => void ending.push(work),
          commit: async () => {
            decide('commit');
            await outcome;
          },
          rollback: async () => {
            decide('rollback');
            await outcome.catch(() => undefined);
          },
        });
        const chosen = await decision;
        for (const work of ending.splice(0)) await work().catch(() => undefined);
        if (chosen === 'rollback') throw new RollBack('rolled back on purpose');
      },
      { isolationLevel: options.isolationLevel },
    );
    outcome.catch((error) => {
      if (!held) rejectHold(error);
    });
  });
}
