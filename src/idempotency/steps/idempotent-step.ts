import { currentHandlerStart, HandlerStart, trackHandlerStart } from '../call-marks';
import type { IdempotencyAttempt } from '../idempotency.service';
import type { IdempotentCall } from '../idempotency.options';
import type { StepJournal } from './step-journal';
import { changesAtStart, IdempotentStepOutsideCallError, StepScope } from './step-scope';

/**
 * Runs `work` — a call to a system outside the database, such as a payment provider — at most once per idempotency
 * key, as a recovery point of the `@Idempotent()` handler it is called from. Its result is committed on its own
 * (`idempotency_steps`) before the handler goes on; a retry of the key after a crash or a failed run does not call
 * `work` again but gets the recorded result. The handler's database writes and its response are still committed
 * together at the end.
 *
 * `work` receives the step key (64 hex characters, derived from the call's scope, key, request and the step's
 * name): pass it to the external system as its own idempotency key, so that a call that succeeded but whose result
 * was never recorded (a crash in between) is recognised there.
 *
 * The result is stored as JSON and handed back parsed, on the first run too: plain data survives, a Date becomes a
 * string, a class instance a plain object (see docs/idempotency.md). When `work` throws, nothing is recorded and the
 * next retry calls it again. Steps of one key never run at the same time. On SQLite, call steps before the
 * handler's first write.
 *
 * @throws IdempotentStepOutsideCallError outside an `@Idempotent()` handler run with a key.
 * @throws IdempotentStepNameError when `name` is empty or longer than 100 characters.
 * @throws IdempotentStepResultError when the result cannot be stored as JSON (a BigInt, a cycle).
 * @throws IdempotentStepOrderError on SQLite, after the handler wrote or inside a nested `transaction()`.
 */
export function idempotentStep<T>(name: string, work: (stepKey: string) => T | Promise<T>): Promise<Awaited<T>> {
  const scope = currentHandlerStart()?.steps?.();
  if (!scope) {
    throw new IdempotentStepOutsideCallError(
      `idempotentStep('${String(name)}') was called outside an idempotent call. Call it from a handler guarded by ` +
        '@Idempotent() (and awaited before the handler returns); a request without an idempotency key runs the ' +
        'handler without a record, so require the key (`required: true`, the default) on handlers that use steps.',
    );
  }
  return scope.run(name, work) as Promise<Awaited<T>>;
}

/**
 * Runs `work` (which runs the handler of an idempotent call through the attempt it is given) so that
 * `idempotentStep()` finds the call, and `emit()` its record (the cause of what it emits): on the call's start mark
 * when there is one (HTTP), else on a mark of its own (messages). The mark is entered again inside `attempt.run()`, whose async context may be another one (a plugged-in
 * transaction source binds the handler to its own). Nothing touches the database unless a step is called (SQLite
 * reads one in-process counter).
 */
export function withSteps<T>(
  journal: () => StepJournal,
  call: IdempotentCall,
  attempt: IdempotencyAttempt,
  work: (attempt: IdempotencyAttempt) => Promise<T>,
): Promise<T> {
  let scope: StepScope | undefined;
  let settled = false;
  const changes = changesAtStart(attempt.context);
  const steps = () => (settled ? undefined : (scope ??= new StepScope(journal(), call, attempt, changes)));
  const mark: HandlerStart = currentHandlerStart() ?? { started: false };
  mark.steps = steps;
  const cause = { dataSource: call.options.dataSource, scope: call.scope, key: call.key };
  mark.cause = cause;
  const marked: IdempotencyAttempt = { ...attempt, run: (inner) => attempt.run(() => trackHandlerStart(mark, inner)) };
  return work(marked).finally(() => {
    settled = true;
    if (mark.cause === cause) mark.cause = undefined;
  });
}
