import type { IdempotencyAttempt } from '../held-attempt';
import type { IdempotentCall } from '../idempotent-call.types';
import { reusedKeyProblem } from '../idempotency.problems';
import { MAX_STEP_NAME_LENGTH } from '../../schema/idempotency-step.entity';
import { StepCommitter } from './step-commit';
import type { StepJournal } from './step-journal';
import { stepKeyOf } from './step-key';
import { parseStepResult, serializeStepResult } from './step-result';
import { IdempotentStepNameError } from './step.errors';

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
