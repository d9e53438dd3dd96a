import { AsyncResource } from 'node:async_hooks';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { CarryingQueryRunner, createCarryingRunner } from './postgres-carrying-runner';
import { currentTransaction, runInTransactionContext } from './transaction-context';
import { runAfterCommit, sharesOneConnection, waitForTurn } from './transaction-runner';
import { transactionSourceOf } from './transaction-source.registry';
import type {
  OutboxStatement,
  OutboxTransactionContext,
  OutboxTransactionOptions,
  OutboxTransactionSource,
} from './transaction.types';
import { DatabaseBusyError } from '../dialects/database-busy';

/**
 * A transaction held open for a caller that decides only at the end whether it commits: a key guard takes the key
 * in it (`first`), runs the handler in it, then writes the record as it commits (`commit(last)`), or rolls back.
 * Exactly one of `commit()` and `rollback()` ends it.
 */
export interface HeldTransaction {
  readonly context: OutboxTransactionContext;
  /** The rows each of the `first` statements returned, in order. */
  readonly opened: unknown[][];
  /** Runs `work` where the transaction is ambient (`OutboxService.manager`, `transaction()` and `emit()` join it). */
  run<T>(work: () => T): T;
  /**
   * Runs `last` (in `COMMIT`'s round trip where the runner can), commits, then runs the `afterCommit` callbacks.
   * When a statement or the commit fails, rolls back and rejects with its error.
   */
  commit(last?: readonly OutboxStatement[]): Promise<void>;
  /** Rolls back. Never rejects: a transaction that cannot be rolled back ends with its connection. */
  rollback(): Promise<void>;
}

/** Options of a held transaction. */
export interface HoldOptions extends OutboxTransactionOptions {
  /** Gets the pooled connection of a built-in transaction (to bound the wait, say); `runner.connect()` by default. */
  connect?: (runner: QueryRunner) => Promise<unknown>;
  /**
   * The library's statements that open the transaction; their rows are `opened`. With the built-in runner on
   * PostgreSQL they travel in `BEGIN`'s round trip (as `commit(last)` travels with `COMMIT`): a key guard then costs
   * no round trip of its own.
   */
  first?: readonly OutboxStatement[];
  /**
   * Statements for the transaction's connection once the transaction has ended — however it ended, `first` failing
   * included — before the connection goes back to the pool (a named lock that outlives transactions, e.g. MySQL's
   * `GET_LOCK`). Under a plugged-in source, which ends the transaction itself, they run just before that end. Their
   * errors are ignored.
   */
  afterEnd?: readonly OutboxStatement[];
  /**
   * Milliseconds to wait for the answer to a round trip that carries `first` or `last` (client side, PostgreSQL:
   * a database that stalls cannot hold the caller longer; the connection is then discarded). Unbounded by default.
   */
  roundTripTimeout?: number;
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

/** Runs `statements` one by one in the transaction of `manager` and returns the rows of each. */
export async function runStatements(
  manager: EntityManager,
  statements: readonly OutboxStatement[],
): Promise<unknown[][]> {
  const rows: unknown[][] = [];
  for (const { sql, params } of statements) {
    const result = await manager.queryRunner!.query(sql, params ? [...params] : [], true);
    rows.push(Array.isArray(result.records) ? result.records : []);
  }
  return rows;
}

/**
 * The built-in runner's query runner for a held transaction: on PostgreSQL one that carries statements with its
 * `BEGIN` and `COMMIT` (`postgres-carrying-runner.ts`), unless an isolation level is set (its `SET TRANSACTION`
 * must come before any statement, so the statements then follow in round trips of their own).
 */
function runnerFor(dataSource: DataSource, options: HoldOptions): QueryRunner {
  // `isolationLevel` among the DataSource's options is TypeORM 1's (0.3 has none there).
  const isolated = options.isolationLevel ?? (dataSource.options as { isolationLevel?: string }).isolationLevel;
  if (dataSource.options.type === 'postgres' && !isolated) return createCarryingRunner(dataSource);
  return dataSource.createQueryRunner();
}

/**
 * Releases `runner`; after a `failure` its connection is closed instead of going back to the pool (TypeORM's
 * PostgreSQL runner takes the error for that; elsewhere the driver's pool drops a dead connection itself).
 */
function releaseRunner(runner: QueryRunner, failure: unknown): Promise<void> {
  const discard = (runner as { releasePostgresConnection?: (error?: unknown) => Promise<void> })
    .releasePostgresConnection;
  return failure && discard ? discard.call(runner, failure) : runner.release();
}

function carrying(runner: QueryRunner): CarryingQueryRunner | undefined {
  return 'carry' in runner ? (runner as CarryingQueryRunner) : undefined;
}

async function holdBuiltIn(dataSource: DataSource, options: HoldOptions): Promise<HeldTransaction> {
  const endTurn = sharesOneConnection(dataSource) ? await waitForTurn(dataSource) : undefined;
  const runner = runnerFor(dataSource, options);
  const carrier = carrying(runner);
  const timeout = options.roundTripTimeout;
  /** Set when the connection cannot be trusted any more (a round trip timed out, a rollback failed): discarded. */
  let broken: unknown;
  const finish = async () => {
    if (!broken) await runStatements(runner.manager, options.afterEnd ?? []).catch(() => undefined);
    await releaseRunner(runner, broken).catch(() => undefined);
    endTurn?.();
  };
  const rollback = async () => {
    // After a round trip that timed out the connection is mid-statement: it is discarded, not rolled back.
    broken ??= carrier?.broken;
    if (!runner.isTransactionActive || broken) return;
    await runner.rollbackTransaction().catch((error: unknown) => (broken = error));
  };
  let opened: unknown[][];
  try {
    await (options.connect ? options.connect(runner) : runner.connect());
  } catch (error) {
    // No connection: nothing to end. A connection that arrives late is the `connect` option's to give back (a
    // runner released before its connection arrives would keep it for ever, and TypeORM's pool could not close).
    endTurn?.();
    throw error;
  }
  try {
    const first = options.first ?? [];
    carrier?.carry('START TRANSACTION', first, timeout);
    await runner.startTransaction(options.isolationLevel);
    opened = carrier?.carriedRows() ?? (await runStatements(runner.manager, first));
  } catch (error) {
    await rollback();
    await finish();
    throw error;
  }
  const context: OutboxTransactionContext = { dataSource, manager: runner.manager, afterCommit: [] };
  return {
    context,
    opened,
    run: (work) => runInTransactionContext(context, work),
    commit: async (last = []) => {
      try {
        if (carrier) carrier.carry('COMMIT', last, timeout);
        else await runStatements(runner.manager, last);
        await runner.commitTransaction();
        if (carrier && !carrier.carriedRows()) {
          throw new Error('The statements sent with COMMIT were not sent: TypeORM no longer commits with `COMMIT`.');
        }
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
    type Decision = { commit: true; last: readonly OutboxStatement[] } | { commit: false };
    let decide!: (decision: Decision) => void;
    const decision = new Promise<Decision>((resolve) => (decide = resolve));
    let held = false;

    const outcome = source.run(
      dataSource,
      async (manager) => {
        const context = currentTransaction(dataSource) ?? { dataSource, manager, afterCommit: [] };
        const afterEnd = () => runStatements(manager, options.afterEnd ?? []).catch(() => undefined);
        let opened: unknown[][];
        try {
          opened = await runStatements(manager, options.first ?? []);
        } catch (error) {
          await afterEnd();
          throw error;
        }
        held = true;
        resolveHold({
          context,
          opened,
          run: AsyncResource.bind(<T>(work: () => T): T => work()),
          commit: async (last = []) => {
            decide({ commit: true, last });
            await outcome;
          },
          rollback: async () => {
            decide({ commit: false });
            await outcome.catch(() => undefined);
          },
        });
        const chosen = await decision;
        try {
          if (chosen.commit) await runStatements(manager, chosen.last);
        } finally {
          await afterEnd();
        }
        if (!chosen.commit) throw new RollBack('rolled back on purpose');
      },
      { isolationLevel: options.isolationLevel },
    );
    outcome.catch((error) => {
      if (!held) rejectHold(error);
    });
  });
}

/**
 * The connection of `runner`, waited for at most `timeoutMs`: the drivers' pools may queue a request without a time
 * limit (mysql2 always; `pg` without `connectionTimeoutMillis`). On expiry throws `DatabaseBusyError` (answered 503
 * `database-busy`); a connection that arrives later is given back to the pool at once.
 */
export async function connectWithin(runner: QueryRunner, timeoutMs: number): Promise<unknown> {
  const connecting: Promise<unknown> = runner.connect();
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      // Too late for this request: whatever the pool hands over later goes straight back.
      const release = () => runner.release();
      connecting.then(release, release).catch(() => undefined);
      reject(
        new DatabaseBusyError(
          `No database connection became free within ${timeoutMs} ms (idempotency.connectionTimeout): every ` +
            'connection of the pool is in use, or the database does not answer. Raise the pool size (PostgreSQL ' +
            '`extra.max`, MySQL/MariaDB `extra.connectionLimit`), shorten the transactions that hold connections, or ' +
            'raise `connectionTimeout`.',
        ),
      );
    }, timeoutMs);
  });
  try {
    return await Promise.race([connecting, expired]);
  } finally {
    clearTimeout(timer);
  }
}
