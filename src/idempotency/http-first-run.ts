import { HttpException, HttpStatus } from '@nestjs/common';
import { Observable, of } from 'rxjs';
import { HandlerStart, trackHandlerStart } from './call-marks';
import type { IdempotencyAttempt } from './held-attempt';
import type { IdempotentCall, StoredResponse } from './idempotency.options';
import { reportIdempotencyOutcome } from '../events/idempotency-channel';
import { describeError } from '../util/describe-error';
import type { StoredIdempotencyRecord } from '../dialects/key-store';
import type { IdempotencyService } from './idempotency.service';
import { IdempotencyProblemException } from './idempotency.problems';

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

/**
 * Failures that are the outcome of a request (a declined payment), kept and replayed as Stripe does: which errors
 * are final (`replayErrors`), the response Nest's exception filter sends for one, and its record, written in a short
 * transaction of its own after the handler's transaction rolled back.
 */

/** Client errors that a retry may well turn out differently: timeout, conflict, too early, too many requests. */
const RETRYABLE_CLIENT_ERRORS = new Set([
  HttpStatus.REQUEST_TIMEOUT,
  HttpStatus.CONFLICT,
  425, // Too Early
  HttpStatus.TOO_MANY_REQUESTS,
]);

/** The default policy: an `HttpException` with a 4xx status other than 408, 409, 425 and 429. */
export function isFinalByDefault(error: unknown): boolean {
  if (!(error instanceof HttpException)) return false;
  const status = error.getStatus();
  return status >= 400 && status < 500 && !RETRYABLE_CLIENT_ERRORS.has(status);
}

/**
 * Whether the handler's `error` is its final outcome: the handler started (not a pipe's error), the error is an
 * `HttpException` under 500 that is not one of the idempotency problems, and `replayErrors` accepts it.
 */
export function isFinalError(
  error: unknown,
  replayErrors: boolean | ((error: unknown) => boolean),
  started: boolean,
): error is HttpException {
  if (!started || replayErrors === false) return false;
  if (!(error instanceof HttpException) || error instanceof IdempotencyProblemException) return false;
  if (error.getStatus() >= 500) return false;
  return replayErrors === true ? isFinalByDefault(error) : replayErrors(error) === true;
}

/** The response Nest's default exception filter sends for `error`: its status and `getResponse()` as JSON. */
export function failureResponse(error: HttpException): StoredResponse {
  const status = error.getStatus();
  const response = error.getResponse();
  const body = typeof response === 'object' && response !== null ? response : { statusCode: status, message: response };
  return { status, body: JSON.stringify(body), headers: null };
}

/**
 * Keeps a final failure as the key's record, in a transaction of its own, only while the key is free: resolves with
 * `answer(record)` when another request committed the key meanwhile, else throws `error` (the first outcome). When
 * another request holds the key, or the record cannot be written, nothing is kept and `error` is thrown.
 */
export async function keepFailure(
  idempotency: IdempotencyService,
  call: IdempotentCall,
  error: HttpException,
  answer: (record: StoredIdempotencyRecord) => Observable<unknown>,
  logger: { warn(message: string): void },
): Promise<Observable<unknown>> {
  const record = { fingerprint: call.fingerprint, ttl: call.options.ttl, ...failureResponse(error) };
  let winner: StoredIdempotencyRecord | undefined;
  try {
    const begun = await idempotency.begin(call.scope, call.key, call.fingerprint);
    if (begun.kind === 'stored') winner = begun.record;
    else if (begun.kind === 'acquired' && !(await begun.attempt.commit(record))) {
      winner = await idempotency.read(call.scope, call.key);
    }
  } catch (writeError) {
    logger.warn(`The failure of a request could not be kept for its key (${describeError(writeError)}).`);
  }
  if (winner) return answer(winner);
  throw error;
}
