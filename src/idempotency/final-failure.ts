import { HttpException, HttpStatus } from '@nestjs/common';
import type { Observable } from 'rxjs';
import { describeError } from '../util/describe-error';
import type { StoredIdempotencyRecord } from '../dialects/key-store';
import type { IdempotentCall, StoredResponse } from './idempotent-call.types';
import type { IdempotencyService } from './idempotency.service';
import { IdempotencyProblemException } from './idempotency.problems';

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
