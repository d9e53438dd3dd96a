import type { IdempotencyAttempt } from '../idempotency.service';
import type { IdempotentCall } from '../idempotency.options';
import { reusedKeyProblem } from '../idempotency.problems';
import { MAX_STEP_NAME_LENGTH } from '../../schema/idempotency-step.entity';
import type { NewRecordedStep, StepJournal } from './step-journal';
import { sqliteTotalChanges, sqliteTransactionDepth } from '../../dialects/sqlite/sqlite-inner-commit';
import { commitEarly } from '../../transaction/commit-early';
import type { OutboxTransactionContext } from '../../transaction/transaction.types';
import { createHash } from 'node:crypto';
import { OutboxError, type OutboxErrorCode } from '../../errors';

/**
 * The steps of one run of an idempotent call (created at its first `idempotentStep()`): runs each named step once
 * per key, one at a time, and hands back its recorded result when an earlier run of the key already completed it.
 */
export class StepScope {
  /** Results (JSON text) of the steps completed or read during this run. */
  private readonly done = new Map<string, string | null>();
  /** The previous step of this run: steps of one call run one after another, never at the same time. */
  private queue: Promise<unknown> = Promise.resolve();
  private readonly committer: StepCommitter;

  constructor(
    private readonly journal: StepJournal,
    private readonly call: IdempotentCall,
    private readonly attempt: IdempotencyAttempt,
    changesAtStart: number | undefined,
  ) {
    this.committer = new StepCommitter(journal, attempt.context, changesAtStart);
  }

  run<T>(name: string, work: (stepKey: string) => T | Promise<T>): Promise<T> {
    checkStepName(name);
    const turn = this.queue.then(() => this.runOnce(name, work));
    this.queue = turn.catch(() => undefined);
    return turn;
  }

  private async runOnce<T>(name: string, work: (stepKey: string) => T | Promise<T>): Promise<T> {
    const { scope, key, fingerprint, options } = this.call;
    if (this.done.has(name)) return parseStepResult(this.done.get(name)!) as T;
    const recorded = await this.journal.read(this.attempt.context.manager, scope, key, name);
    if (recorded && !recorded.expired) {
      if (recorded.fingerprint !== fingerprint) throw reusedKeyProblem(options.header);
      this.done.set(name, recorded.result);
      return parseStepResult(recorded.result) as T;
    }
    this.committer.check(name);
    const value = await work(stepKeyOf(scope, key, fingerprint, name));
    const result = serializeStepResult(name, value);
    await this.committer.commit(
      { scope, key, step: name, fingerprint, result, ttl: options.ttl },
      recorded?.expired === true,
    );
    this.done.set(name, result);
    return parseStepResult(result) as T;
  }
}

function checkStepName(name: unknown): asserts name is string {
  if (typeof name === 'string' && name.length > 0 && name.length <= MAX_STEP_NAME_LENGTH) return;
  throw new IdempotentStepNameError(
    `idempotentStep() needs a name: a non-empty string of at most ${MAX_STEP_NAME_LENGTH} characters, unique ` +
      `within the handler (got ${typeof name === 'string' ? `${name.length} characters` : typeof name}). ` +
      'In a loop, number the steps: idempotentStep(`refund:${i}`, …).',
  );
}

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

/**
 * The step key handed to a step's callback: SHA-256 (64 hex characters) of the call's scope, key, fingerprint and
 * the step's name. The same for every retry of the same request, different for another step, another key, another
 * principal or another request sent with a reused key. Pass it to the external system as its own idempotency key,
 * so that a call that succeeded but whose result was never recorded is not done twice there.
 */
export function stepKeyOf(scope: string, key: string, fingerprint: string, step: string): string {
  return createHash('sha256').update(`step\u0000${scope}\u0000${key}\u0000${fingerprint}\u0000${step}`).digest('hex');
}

/**
 * A step's result is stored as JSON text and handed back parsed, on the first run as on a resumed one, so the
 * handler sees the same value either way. What survives: strings, finite numbers, booleans, null, arrays and plain
 * objects of those. A Date becomes its ISO string; a class instance a plain object of its own enumerable fields (or
 * what its `toJSON()` returns); NaN and ±Infinity become null; `undefined` (also a function or a symbol) as the
 * whole result becomes undefined, inside an object the field is dropped. A BigInt or a circular structure cannot be
 * stored: `IdempotentStepResultError`.
 */

/** The JSON text of `value`, or null for undefined. */
export function serializeStepResult(step: string, value: unknown): string | null {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new IdempotentStepResultError(
      `The step '${step}' ran, but its result cannot be stored as JSON (${(error as Error).message}), so a retry ` +
        'would run it again. Return plain JSON data from the callback (convert a BigInt to a string, drop cycles).',
    );
  }
  return text === undefined ? null : text;
}

/** The value a stored result stands for. */
export function parseStepResult(text: string | null): unknown {
  return text === null ? undefined : JSON.parse(text);
}

/**
 * `idempotentStep()` was called where no idempotent call is running: outside a handler guarded by `@Idempotent()`,
 * in one that runs without a key (an optional key the client did not send), or after the handler returned.
 */
export class IdempotentStepOutsideCallError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_STEP_OUTSIDE_CALL';
}

/** The step's name is not a non-empty string of at most 100 characters. */
export class IdempotentStepNameError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_STEP_NAME';
}

/**
 * The step's callback succeeded, but its result cannot be stored as JSON (a BigInt, a circular structure): the
 * external call happened and was not recorded. Return plain JSON data from the callback.
 */
export class IdempotentStepResultError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_STEP_RESULT';
}

/**
 * On SQLite a step cannot commit its result once the handler has written in its transaction (SQLite has one
 * connection, so the step's commit would commit those writes too), nor inside a nested `transaction()`.
 */
export class IdempotentStepOrderError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_STEP_ORDER';
}
