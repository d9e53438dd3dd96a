import { Logger } from '@nestjs/common';
import type { DataSource, EntityManager } from 'typeorm';
import { SerialQueue } from '../util/serial-queue';
import { OutboxInTransactionError } from '../errors';
import { currentTransaction, outsideTransactionContext, runInTransactionContext } from './transaction-context';
import { describeError } from '../util/describe-error';
import { transactionSourceOf } from './transaction-source.registry';
import type { OutboxTransactionContext, OutboxTransactionOptions } from './transaction.types';

const queues = new WeakMap<DataSource, SerialQueue>();
const logger = new Logger('OutboxTransaction');

/** True when all of a DataSource's transactions share one connection, so they must take turns (SQLite). */
export function sharesOneConnection(dataSource: DataSource): boolean {
  const type = dataSource.options.type;
  return type === 'better-sqlite3' || type === 'sqljs' || type === 'capacitor' || type === 'expo';
}

function queueOf(dataSource: DataSource): SerialQueue {
  let queue = queues.get(dataSource);
  if (!queue) {
    queue = new SerialQueue();
    queues.set(dataSource, queue);
  }
  return queue;
}

/**
 * Runs `work` in a transaction of `dataSource` that is ambient for everything `work` awaits. If the caller is
 * already inside a transaction of the same DataSource, `work` joins it instead. After a commit the context's
 * `afterCommit` callbacks run (errors in them are logged, never thrown).
 */
export async function runInTransaction<T>(
  dataSource: DataSource,
  work: (manager: EntityManager) => Promise<T>,
  options: OutboxTransactionOptions = {},
): Promise<T> {
  const source = transactionSourceOf(dataSource);
  if (source) return source.run(dataSource, work, options);
  const outer = currentTransaction(dataSource);
  if (outer) return work(outer.manager);

  const open = async (): Promise<{ result: T; context: OutboxTransactionContext }> => {
    let context!: OutboxTransactionContext;
    const body = (manager: EntityManager) => {
      context = { dataSource, manager, afterCommit: [] };
      return runInTransactionContext(context, () => work(manager));
    };
    const result = options.isolationLevel
      ? await dataSource.transaction(options.isolationLevel, body)
      : await dataSource.transaction(body);
    return { result, context };
  };

  const { result, context } = sharesOneConnection(dataSource) ? await queueOf(dataSource).run(open) : await open();
  runAfterCommit(context);
  return result;
}

/** Runs a committed transaction's `afterCommit` callbacks (errors in them are logged, never thrown). */
export function runAfterCommit(context: OutboxTransactionContext): void {
  for (const callback of context.afterCommit) {
    try {
      callback();
    } catch (error) {
      logger.error(`An after-commit callback failed: ${describeError(error)}`);
    }
  }
}

/** Runs `task` in `dataSource`'s turn when its connections are really one (SQLite), else at once. */
export function takeTurn<T>(dataSource: DataSource, task: () => Promise<T>): Promise<T> {
  return sharesOneConnection(dataSource) ? queueOf(dataSource).run(task) : task();
}

/**
 * Waits for `dataSource`'s turn (SQLite: its connections are really one) and holds it until the function it resolves
 * with is called.
 */
export function waitForTurn(dataSource: DataSource): Promise<() => void> {
  return new Promise((taken) => {
    void queueOf(dataSource).run(() => new Promise<void>((release) => taken(release)));
  });
}

/**
 * Runs `work` with a manager of `dataSource` outside any transaction of the caller, taking the DataSource's turn
 * on SQLite (so the statement cannot land inside another caller's open transaction on the shared connection).
 */
export function runOnConnection<T>(dataSource: DataSource, work: (manager: EntityManager) => Promise<T>): Promise<T> {
  if (sharesOneConnection(dataSource)) return queueOf(dataSource).run(() => work(dataSource.manager));
  return work(dataSource.manager);
}

/** Thrown inside a rolled-back transaction once its work is done, so that the transaction is rolled back. */
class RollBack extends Error {}

/**
 * Throws `OutboxInTransactionError` when the caller runs inside a transaction of `dataSource` (the built-in one or a
 * plugged-in source's): for work that must run in a transaction of its own, always rolled back. `what` names it.
 */
export function refuseInTransaction(
  dataSource: DataSource,
  what: string,
  why = "it runs in transactions of its own, always rolled back, which must not nest in (or wait for) the caller's",
): void {
  if (!currentTransaction(dataSource)) return;
  throw new OutboxInTransactionError(
    `${what} was called inside a transaction of the outbox's DataSource; ${why}. Call it outside any transaction.`,
  );
}

/**
 * Runs `work` in a new transaction of `dataSource` that is always rolled back — when `work` resolves as when it
 * throws — with the transaction ambient (so `OutboxService.manager`, `transaction()` and `emit()` inside `work`
 * join it, through the plugged-in transaction source when there is one). Refuses to run inside a transaction of
 * `dataSource` (`refuseInTransaction()`): a plugged-in source would join it, and its rollback would not undo
 * `work`'s writes. No after-commit callback runs. Resolves with what `work` resolved.
 */
export function runRolledBack<T>(dataSource: DataSource, work: (manager: EntityManager) => Promise<T>): Promise<T> {
  refuseInTransaction(dataSource, 'A rolled-back run (OutboxDeadLetters.dryRun())');
  return outsideTransactionContext(async () => {
    const done: { result?: T } = {};
    try {
      await runInTransaction(dataSource, async (manager) => {
        done.result = await work(manager);
        throw new RollBack('rolled back on purpose');
      });
    } catch (error) {
      if (error instanceof RollBack && 'result' in done) return done.result as T;
      throw error;
    }
    throw new Error('unreachable: a rolled-back transaction committed');
  });
}
