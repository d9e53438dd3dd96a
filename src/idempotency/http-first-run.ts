import type { HttpException } from '@nestjs/common';
import { Observable, of } from 'rxjs';
import { isFinalError } from './final-failure';
import { HandlerStart, trackHandlerStart } from './handler-start';
import type { IdempotencyAttempt } from './held-attempt';
import type { IdempotentCall, StoredResponse } from './idempotent-call.types';
import { reportIdempotencyOutcome } from '../events/idempotency-channel';

/**
 * The first run of an HTTP request with a new key: the handler runs in the attempt's transaction, what the client
 * receives is captured and committed with the record; a stream is committed without one; when another request
 * committed the key first, its record answers.
 */

/** The interceptor's steps for one request's first run (each bound to the interceptor's step). */
export interface FirstRequestSteps {
  /** Runs the handler in the attempt's transaction (`runHandler`). */
  run(): Promise<unknown>;
  /** The response to store, undefined when it cannot be stored (`toStoredResponse`). */
  capture(value: unknown): StoredResponse | undefined;
  /** Rolls back after a failure of the handler or the capture (`rollbackQuietly`). */
  rollback(): Promise<void>;
  /** The error to throw for a failure of the handler, the capture or the commit (`databaseError`). */
  failure(error: unknown): unknown;
  /** Told that the response cannot be stored, before its effect is committed without a record. */
  notStored(): void;
  /** Answers when another request committed the key first (`afterLostRace`). */
  lostRace(): Promise<Observable<unknown>>;
  /** Keeps a final error (see `replayErrors`) as the key's record after the rollback, then throws or replays it. */
  keepFailure(error: HttpException): Promise<Observable<unknown>>;
}

/** Runs the handler, commits its effect with the record of its response, and answers with the handler's value. */
export async function runFirstRequest(
  attempt: IdempotencyAttempt,
  call: IdempotentCall,
  steps: FirstRequestSteps,
): Promise<Observable<unknown>> {
  let value: unknown;
  let stored: StoredResponse | undefined;
  const start: HandlerStart = { started: false };
  try {
    value = await trackHandlerStart(start, () => steps.run());
    stored = steps.capture(value);
  } catch (error) {
    await steps.rollback();
    if (isFinalError(error, call.options.replayErrors, start.started)) return steps.keepFailure(error);
    throw steps.failure(error);
  }
  try {
    if (!stored) {
      steps.notStored();
      await attempt.commitWithoutRecord();
      return of(value);
    }
    if (await attempt.commit({ fingerprint: call.fingerprint, ttl: call.options.ttl, ...stored })) {
      reportIdempotencyOutcome('executed', call.options, 'http');
      return of(value);
    }
    return await steps.lostRace();
  } catch (error) {
    throw steps.failure(error);
  }
}
