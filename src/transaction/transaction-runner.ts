import { Logger } from '@nestjs/common';
import type { DataSource, EntityManager } from 'typeorm';
import { SerialQueue } from '../util/serial-queue';
import { currentTransaction, runInTransactionContext } from './transaction-context';
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
 * Runs `work` with a manager of `dataSource` outside any transaction of the caller, taking the DataSource's turn
 * on SQLite (so the statement cannot land inside another caller's open transaction on the shared connection).
 */
export function runOnConnection<T>(dataSource: DataSource, work: (manager: EntityManager) => Promise<T>): Promise<T> {
  if (sharesOneConnection(dataSource)) return queueOf(dataSource).run(() => work(dataSource.manager));
  return work(dataSource.manager);
}
