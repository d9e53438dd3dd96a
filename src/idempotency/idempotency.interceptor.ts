import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { lastValueFrom, Observable, of } from 'rxjs';
import { describeError } from '../util/describe-error';
import { isDatabaseBusy } from '../dialects/database-busy';
import { isDatabaseUnavailable } from '../dialects/database-unavailable';
import { keepFailure, runFirstRequest } from './http-first-run';
import * as httpRequest from './http-request';
import { isGuardedByOuterApplication, rememberIdempotencyKey } from './call-marks';
import type { StoredIdempotencyRecord } from '../dialects/key-store';
import type { IdempotencyAttempt } from './held-attempt';
import * as warnings from './idempotency.problems';
import type { IdempotentCall, ResolvedIdempotentOptions } from './idempotency.options';
import { IdempotencyService } from './idempotency.service';
import {
  databaseBusyProblem,
  databaseUnavailableProblem,
  IdempotencyProblemException,
  inFlightProblem,
  missingKeyProblem,
  nestedTooDeeplyProblem,
  reusedKeyProblem,
} from './idempotency.problems';
import { CallSteps } from './call-steps';
import { MessageCalls } from './message-calls';
import { boundedText, MAX_JSON_DEPTH, scopeFromOption, withinJsonDepth } from './fingerprint';
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

  /** The winner: runs the handler in the transaction, stores what the client receives, commits. */
  private async runFirstHttp(
    context: ExecutionContext,
    next: CallHandler,
    attempt: IdempotencyAttempt,
    call: IdempotentCall,
  ): Promise<Observable<unknown>> {
    const { consumer, header, retryAfter } = call.options;
    const answer = (record: StoredIdempotencyRecord) => this.answerStoredHttp(context, record, call);
    const inFlight = () => {
      throw this.reject(context, inFlightProblem(header, retryAfter));
    };
    return runFirstRequest(attempt, call, {
      // next.handle() binds the async context it is called in: it is called inside the transaction's context.
      run: () => this.steps.run(() => lastValueFrom(next.handle(), { defaultValue: undefined }), attempt, call),
      // What the client receives (class instances through class-transformer, so `@Exclude()`d fields are never
      // stored), the route's status and the `replayHeaders` set; undefined for a stream (not replayable).
      capture: (value) => captureResponse(this.steps.reflector, context, value, call.options),
      rollback: () => this.steps.rollback(attempt),
      failure: (error) => this.databaseError(context, error, call.options),
      notStored: () => this.steps.warnOnce(consumer, warnings.streamNotStored(consumer)),
      lostRace: () => this.steps.afterLostRace(call, answer, inFlight),
      keepFailure: (error) => keepFailure(this.steps.idempotency, call, error, answer, this.steps.logger),
    });
  }

  /** The exception to throw for a refused request (answered as problem+json by `IdempotencyProblemFilter`). */
  private reject(context: ExecutionContext, problem: IdempotencyProblemException): IdempotencyProblemException {
    reportIdempotencyOutcome(outcomeOfStatus(problem.problem.status), this.steps.optionsOf(context), 'http');
    return problem;
  }
}
