import { CallHandler, ExecutionContext, HttpException, HttpStatus, Injectable, NestInterceptor } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { lastValueFrom, Observable, of } from 'rxjs';
import { describeError } from '../util/describe-error';
import { isDatabaseBusy } from '../dialects/database-busy';
import { isDatabaseUnavailable } from '../dialects/database-unavailable';
import * as httpRequest from './http-request';
import { HandlerStart, isGuardedByOuterApplication, rememberIdempotencyKey, trackHandlerStart } from './call-marks';
import type { StoredIdempotencyRecord } from '../dialects/key-store';
import { type IdempotencyAttempt, IdempotencyService } from './idempotency.service';
import * as warnings from './idempotency.problems';
import type { IdempotentCall, ResolvedIdempotentOptions, StoredResponse } from './idempotency.options';
import {
  databaseBusyProblem,
  databaseUnavailableProblem,
  IdempotencyProblemException,
  inFlightProblem,
  missingKeyProblem,
  nestedTooDeeplyProblem,
  reusedKeyProblem,
} from './idempotency.problems';
import { CallSteps, scopeFromOption } from './call-steps';
import { MessageCalls } from './message-calls';
import { boundedText, MAX_JSON_DEPTH, withinJsonDepth } from './fingerprint';
import { captureResponse, replayResponse } from './http-request';
import { outcomeOfStatus, reportIdempotencyOutcome } from '../events/idempotency-channel';

/**
 * The interceptor behind `@Idempotent()`: every guarded call — an HTTP request or a message — goes through it. It is
 * not part of the public API: an app customises a guarded call through `@Idempotent()`'s options (`scope`, `key`,
 * `fingerprint`, `replayErrors`, `retry`, `mode`, …).
 *
 * An HTTP request is guarded here: its key, scope and fingerprint (`http-request.ts`, `fingerprint.ts`), the key taken
 * (`IdempotencyService.begin`), a stored response replayed or a conflict refused (`idempotency.problems.ts`), else the
 * handler's first run (`http-first-run.ts`). A message goes to `MessageCalls` (`message-calls.ts`). What both do
 * alike — options, the handler's run with its steps, the rollback, a lost race, warnings — is `CallSteps`'.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly steps: CallSteps;
  private readonly messages: MessageCalls;

  constructor(reflector: Reflector, idempotency: IdempotencyService) {
    this.steps = new CallSteps(reflector, idempotency);
    this.messages = new MessageCalls(this.steps);
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> | Promise<Observable<unknown>> {
    const type = context.getType();
    if (type !== 'http' && type !== 'rpc') return next.handle();
    if (isGuardedByOuterApplication(context)) return next.handle();
    return type === 'http' ? this.interceptHttp(context, next) : this.messages.intercept(context, next);
  }

  // ---------------------------------------------------------------------------------------------------- HTTP

  private async interceptHttp(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const options = this.steps.optionsOf(context);
    const key = this.httpKeyOf(context, options);
    if (key === undefined) return next.handle();
    return this.handleRequest(context, key, options, next);
  }

  /**
   * The request's key (quoted or bare), checked and remembered for `@IdempotencyKey()`; undefined when the request
   * is not guarded: a safe method (GET, HEAD, OPTIONS), or no key where none is required. Throws the 400 problem
   * for a required key that is missing and for a malformed one. Runs before the pipes.
   */
  private httpKeyOf(context: ExecutionContext, options: ResolvedIdempotentOptions): string | undefined {
    const request = context.switchToHttp().getRequest();
    if (httpRequest.isSafeMethod(request)) return undefined;
    const raw = httpRequest.readKey(context, request, options);
    if (raw === undefined) {
      if (options.required) throw this.reject(context, missingKeyProblem(options.header));
      return undefined;
    }
    const reject = (problem: IdempotencyProblemException) => this.reject(context, problem);
    const key = httpRequest.acceptKey(raw, options.header, reject, options.maxKeyLength);
    rememberIdempotencyKey(context, key);
    return key;
  }

  /**
   * Guards one request by its key: a stored response is replayed (422 when it was written for a different
   * request), a duplicate in flight is refused (409, or 422 when its body differs), else the handler (`next`) runs
   * once, in a transaction with the key's record.
   */
  private async handleRequest(
    context: ExecutionContext,
    key: string,
    options: ResolvedIdempotentOptions,
    next: CallHandler,
  ): Promise<Observable<unknown>> {
    const request = context.switchToHttp().getRequest();
    const call: IdempotentCall = {
      key,
      scope: boundedText(await scopeFromOption(context, options, this.defaultHttpScope(context, options))),
      fingerprint: withinJsonDepth(
        () => httpRequest.fingerprint(context, request, options),
        () => this.reject(context, nestedTooDeeplyProblem(MAX_JSON_DEPTH)),
      ),
      options,
    };
    const begun = await this.steps.idempotency
      .begin(call.scope, call.key, call.fingerprint, options)
      .catch((error: unknown) => {
        throw this.databaseError(context, error, options);
      });
    if (begun.kind === 'stored') return this.answerStoredHttp(context, begun.record, call);
    if (begun.kind === 'in-flight') {
      // A different request with the key wins over "in flight": 422 rather than 409.
      const { header, retryAfter } = options;
      throw this.reject(context, begun.sameRequest ? inFlightProblem(header, retryAfter) : reusedKeyProblem(header));
    }
    return this.runFirstHttp(context, next, begun.attempt, call);
  }

  /**
   * An HTTP key's scope without a `scope` option: the authenticated principal (`request.user.id`, else `.sub`, as
   * Passport strategies and JWT guards set them), else '' (shared by all clients; warned once).
   */
  private defaultHttpScope(context: ExecutionContext, options: ResolvedIdempotentOptions): string {
    const principal = httpRequest.principalOf(context.switchToHttp().getRequest());
    if (principal !== undefined) return principal;
    if (!options.scope) this.steps.warnOnce(`${options.consumer} principal`, warnings.sharedKeys(options.consumer));
    return '';
  }

  /**
   * A database error of the key-taking steps, the handler or the commit: a 503 problem+json with `Retry-After` when
   * the database is busy (`database-busy`: a pool wait, lock wait or statement timeout) or unreachable
   * (`database-unavailable`, see `isDatabaseUnavailable`) — the transaction is gone, so nothing was applied, or a
   * commit's outcome is unknown and a retry with the same key finds out; any other error as it is.
   */
  private databaseError(context: ExecutionContext, error: unknown, options: ResolvedIdempotentOptions): unknown {
    if (error instanceof IdempotencyProblemException) return error;
    if (isDatabaseBusy(error)) {
      this.steps.logger.debug(`The database is busy (${describeError(error)}): answered 503.`);
      return this.reject(context, databaseBusyProblem(options.header, options.retryAfter));
    }
    if (!isDatabaseUnavailable(error)) return error;
    this.steps.logger.debug(`The database is unreachable (${describeError(error)}): answered 503.`);
    return this.reject(context, databaseUnavailableProblem(options.header, options.retryAfter));
  }

  /** A completed record: replay it, or 422 when it was written for a different request. */
  private answerStoredHttp(
    context: ExecutionContext,
    record: StoredIdempotencyRecord,
    call: IdempotentCall,
  ): Observable<unknown> {
    if (record.fingerprint !== call.fingerprint) throw this.reject(context, reusedKeyProblem(call.options.header));
    return this.replay(context, record);
  }

  /** Sends the stored response again, marked `Idempotent-Replayed: true`. The handler does not run. */
  private replay(context: ExecutionContext, record: StoredIdempotencyRecord): Observable<unknown> {
    reportIdempotencyOutcome('replayed', this.steps.optionsOf(context), 'http');
    return of(replayResponse(context, record));
  }

  /**
   * The winner: runs the handler in the key's transaction, captures what the client receives and commits it with
   * the record; a stream is committed without one; a final failure (`replayErrors`) is kept after the rollback;
   * when another request committed the key first, its record answers.
   */
  private async runFirstHttp(
    context: ExecutionContext,
    next: CallHandler,
    attempt: IdempotencyAttempt,
    call: IdempotentCall,
  ): Promise<Observable<unknown>> {
    const { consumer, header, retryAfter } = call.options;
    const answer = (record: StoredIdempotencyRecord) => this.answerStoredHttp(context, record, call);
    let value: unknown;
    let stored: StoredResponse | undefined;
    const start: HandlerStart = { started: false };
    try {
      // next.handle() binds the async context it is called in: it is called inside the transaction's context.
      const handler = () => lastValueFrom(next.handle(), { defaultValue: undefined });
      value = await trackHandlerStart(start, () => this.steps.run(handler, attempt, call));
      // What the client receives (class instances through class-transformer, so `@Exclude()`d fields are never
      // stored), the route's status and the `replayHeaders` set; undefined for a stream (not replayable).
      stored = captureResponse(this.steps.reflector, context, value, call.options);
    } catch (error) {
      await this.steps.rollback(attempt);
      if (isFinalError(error, call.options.replayErrors, start.started)) {
        return keepFailure(this.steps.idempotency, call, error, answer, this.steps.logger);
      }
      throw this.databaseError(context, error, call.options);
    }
    try {
      if (!stored) {
        this.steps.warnOnce(consumer, warnings.streamNotStored(consumer));
        await attempt.commitWithoutRecord();
        return of(value);
      }
      if (await attempt.commit({ fingerprint: call.fingerprint, ttl: call.options.ttl, ...stored })) {
        reportIdempotencyOutcome('executed', call.options, 'http');
        return of(value);
      }
      return await this.steps.afterLostRace(call, answer, () => {
        throw this.reject(context, inFlightProblem(header, retryAfter));
      });
    } catch (error) {
      throw this.databaseError(context, error, call.options);
    }
  }

  /** The exception to throw for a refused request (answered as problem+json by `IdempotencyProblemFilter`). */
  private reject(context: ExecutionContext, problem: IdempotencyProblemException): IdempotencyProblemException {
    reportIdempotencyOutcome(outcomeOfStatus(problem.problem.status), this.steps.optionsOf(context), 'http');
    return problem;
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
