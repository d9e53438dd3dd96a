import { sqliteTotalChanges, sqliteTransactionDepth } from '../../dialects/sqlite/sqlite-inner-commit';
import { commitEarly } from '../../transaction/commit-early';
import type { OutboxTransactionContext } from '../../transaction/transaction.types';
import type { NewRecordedStep, StepJournal } from './step-journal';
import { IdempotentStepOrderError } from './step.errors';

/**
 * Commits a step's result before the handler goes on, while the handler's own transaction stays open:
 *
 * - PostgreSQL, MySQL/MariaDB: on a connection of its own from the pool (one short autocommit INSERT; the
 *   handler's connection keeps its transaction and its lock on the key).
 * - SQLite: the DataSource has one connection, held by the handler's transaction, so the result is inserted in that
 *   transaction, which is committed and opened again. Allowed only while the handler has written nothing yet
 *   (else its writes would be committed early) and outside a nested `transaction()`.
 */
/** What `StepCommitter` needs to know from the start of the handler's transaction (SQLite only; cheap, in-process). */
export function changesAtStart(context: OutboxTransactionContext): number | undefined {
  const type = context.dataSource.options.type;
  return type === 'better-sqlite3' ? sqliteTotalChanges(context.dataSource) : undefined;
}

export class StepCommitter {
  /** SQLite: rows changed on the connection when the handler's transaction began (or since the last step's commit). */
  private changesAtStart?: number;

  constructor(
    private readonly journal: StepJournal,
    private readonly context: OutboxTransactionContext,
    /** SQLite: `sqliteTotalChanges()` taken when the handler's transaction began (`changesAtStart()`). */
    changesAtStart: number | undefined,
  ) {
    this.changesAtStart = changesAtStart;
  }

  /** Throws, before the step's callback runs, when its result could not be committed (SQLite only). */
  check(step: string): void {
    if (this.journal.dialect.name === 'sqlite') this.checkSqlite(step);
  }

  async commit(row: NewRecordedStep, replaceExpired: boolean): Promise<void> {
    const sqlite = this.journal.dialect.name === 'sqlite';
    if (sqlite) this.checkSqlite(row.step);
    await commitEarly(this.context, (manager) => this.journal.insert(manager, row, replaceExpired));
    if (sqlite) this.changesAtStart = sqliteTotalChanges(this.context.dataSource);
  }

  private checkSqlite(step: string): void {
    const { manager, dataSource } = this.context;
    if (sqliteTransactionDepth(manager) !== 1) {
      throw new IdempotentStepOrderError(
        `The step '${step}' cannot be recorded inside a nested transaction() on SQLite. Call idempotentStep() ` +
          'directly in the @Idempotent() handler, not inside OutboxService.transaction().',
      );
    }
    const changes = sqliteTotalChanges(dataSource);
    if (changes === undefined) {
      throw new IdempotentStepOrderError(
        "idempotentStep() on SQLite needs the 'better-sqlite3' driver (TypeORM type 'better-sqlite3').",
      );
    }
    if (changes !== this.changesAtStart) {
      throw new IdempotentStepOrderError(
        `The step '${step}' was called after the handler wrote to the database. On SQLite (one connection) a ` +
          "step's result can only be committed before the handler's first write: call idempotentStep() first, " +
          'then write.',
      );
    }
  }
}
