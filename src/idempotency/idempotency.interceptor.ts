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
import type { IdempotentCall, ResolvedIdempotentOptions, StoredResponse } from './idempotency.options';
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
import { IdempotencyMessageSteps } from './idempotency-message-steps.base';
import { MAX_JSON_DEPTH, withinJsonDepth } from './fingerprint';
import { captureResponse, replayResponse } from './http-request';
import { outcomeOfStatus, reportIdempotencyOutcome } from '../events/idempotency-channel';

/**
 * The interceptor behind `@Idempotent()`. It is not part of the public API: an app customises a guarded call
 * through `@Idempotent()`'s options (`scope`, `key`, `fingerprint`, `replayErrors`, `retry`, `mode`, …), not by
 * subclassing. Its steps are `protected` for the named-outbox variant (`named-idempotency.interceptor.ts`) and for the
 * library's own tests, which hold a step to put a crash between two of them (the fault suite).
 *
 * This class strings the steps together; their bodies live in files of one job each: `handler-options.resolver.ts`,
 * `http-request-key.ts`, `http-first-run.ts`, `stored-response.ts`, `message-key.ts`, `message-settlement.ts`,
 * `call-scope.ts`, `attempt-rollback.ts`, `idempotency-warnings.ts` and `outer-application.ts`; the message steps are
 * `IdempotencyMessageSteps`' (`idempotency-message-steps.base.ts`), and the steps HTTP and messages share (options,
 * scopes, the handler's run, warnings) are `IdempotencySteps`'.
 */
@Injectable()
export class IdempotencyInterceptor extends IdempotencyMessageSteps implements NestInterceptor {
  constructor(reflector: Reflector, idempotency: IdempotencyService) {
    super(reflector, idempotency);
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> | Promise<Observable<unknown>> {
    const type = context.getType();
    if (type !== 'http' && type !== 'rpc') return next.handle();
    if (isGuardedByOuterApplication(context)) return next.handle();
    return type === 'http' ? this.interceptHttp(context, next) : this.interceptRpc(context, next);
  }

  // ---------------------------------------------------------------------------------------------------- HTTP

  protected async interceptHttp(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const options = this.optionsOf(context);
    const key = this.httpKeyOf(context, options);
    if (key === undefined) return next.handle();
    return this.handleRequest(context, key, options, next);
  }

  /**
   * The request's key (quoted or bare), checked and remembered for `@IdempotencyKey()`; undefined when the request
   * is not guarded: a safe method (GET, HEAD, OPTIONS), or no key where none is required. Throws the 400 problem
   * for a required key that is missing and for a malformed one. Runs before the pipes.
   */
  protected httpKeyOf(context: ExecutionContext, options: ResolvedIdempotentOptions): string | undefined {
    const request = context.switchToHttp().getRequest();
    if (httpRequest.isSafeMethod(request)) return undefined;
    const raw = this.readHttpKey(context, request, options);
    if (raw === undefined) {
      if (options.required) throw this.reject(context, missingKeyProblem(options.header));
      return undefined;
    }
    const key = this.checkHttpKey(context, raw, options);
    rememberIdempotencyKey(context, key);
    return key;
  }

  /**
   * Guards one request by its key: a stored response is replayed (422 when it was written for a different
   * request), a duplicate in flight is refused (409, or 422 when its body differs), else the handler (`next`) runs
   * once, in a transaction with the key's record.
   */
  protected async handleRequest(
    context: ExecutionContext,
    key: string,
    options: ResolvedIdempotentOptions,
    next: CallHandler,
  ): Promise<Observable<unknown>> {
    const request = context.switchToHttp().getRequest();
    const call: IdempotentCall = {
      key,
      scope: this.boundedText(await this.scopeOf(context, options, await this.defaultHttpScope(context, options))),
      fingerprint: this.fingerprintOrReject(context, () => this.fingerprintHttp(context, request, options)),
      options,
    };
    const begun = await this.idempotency
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

  /** The raw key from the header (or the custom extractor), quotes and all; undefined when absent. */
  protected readHttpKey(
    context: ExecutionContext,
    request: any,
    options: ResolvedIdempotentOptions,
  ): string | undefined {
    return httpRequest.readKey(context, request, options);
  }

  /** An HTTP key's scope without a `scope` option: `principalOf`, else '' (shared by all clients; warned once). */
  protected async defaultHttpScope(context: ExecutionContext, options: ResolvedIdempotentOptions): Promise<string> {
    const principal = await this.principalOf(context);
    if (principal !== undefined) return principal;
    if (!options.scope) this.warnOnce(`${options.consumer} principal`, warnings.sharedKeys(options.consumer));
    return '';
  }

  /**
   * The authenticated principal of a request, which HTTP keys are scoped to by default: `request.user.id`, else
   * `request.user.sub` (as Passport strategies and JWT guards set them), as a string; undefined when there is
   * none. Override it to scope by another field (as @nestjs/throttler's `getTracker`).
   */
  protected principalOf(context: ExecutionContext): string | undefined | Promise<string | undefined> {
    return httpRequest.principalOf(context.switchToHttp().getRequest());
  }

  /** The key a raw value carries (quoted sf-string or bare); 400 if malformed, empty or over `maxKeyLength`. */
  protected checkHttpKey(context: ExecutionContext, raw: string, options: ResolvedIdempotentOptions): string {
    return httpRequest.acceptKey(raw, options.header, (problem) => this.reject(context, problem), options.maxKeyLength);
  }

  /** The fingerprint, or 400 problem+json when the request is nested deeper than `MAX_JSON_DEPTH` levels. */
  protected fingerprintOrReject(context: ExecutionContext, fingerprint: () => string): string {
    return withinJsonDepth(fingerprint, () => this.reject(context, nestedTooDeeplyProblem(MAX_JSON_DEPTH)));
  }

  /**
   * A database error of the key-taking steps, the handler or the commit: a 503 problem+json with `Retry-After` when
   * the database is busy (`database-busy`: a pool wait, lock wait or statement timeout) or unreachable
   * (`database-unavailable`, see `isDatabaseUnavailable`) — the transaction is gone, so nothing was applied, or a
   * commit's outcome is unknown and a retry with the same key finds out; any other error as it is.
   */
  protected databaseError(context: ExecutionContext, error: unknown, options: ResolvedIdempotentOptions): unknown {
    if (error instanceof IdempotencyProblemException) return error;
    if (isDatabaseBusy(error)) {
      this.logger.debug(`The database is busy (${describeError(error)}): answered 503.`);
      return this.reject(context, databaseBusyProblem(options.header, options.retryAfter));
    }
    if (!isDatabaseUnavailable(error)) return error;
    this.logger.debug(`The database is unreachable (${describeError(error)}): answered 503.`);
    return this.reject(context, databaseUnavailableProblem(options.header, options.retryAfter));
  }

  /** Default fingerprint: method, path, query and body (key-order independent). */
  protected fingerprintHttp(context: ExecutionContext, request: any, options: ResolvedIdempotentOptions): string {
    return httpRequest.fingerprint(context, request, options);
  }

  /** A completed record: replay it, or 422 when it was written for a different request. */
  protected answerStoredHttp(
    context: ExecutionContext,
    record: StoredIdempotencyRecord,
    call: IdempotentCall,
  ): Observable<unknown> {
    if (record.fingerprint !== call.fingerprint) throw this.reject(context, reusedKeyProblem(call.options.header));
    return this.replay(context, record);
  }

  /** Sends the stored response again, marked `Idempotent-Replayed: true`. The handler does not run. */
  protected replay(context: ExecutionContext, record: StoredIdempotencyRecord): Observable<unknown> {
    reportIdempotencyOutcome('replayed', this.optionsOf(context), 'http');
    return of(replayResponse(context, record));
  }

  /** The winner: runs the handler in the transaction, stores what the client receives, commits. */
  protected async runFirstHttp(
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
      run: () => this.runWithSteps(() => lastValueFrom(next.handle(), { defaultValue: undefined }), attempt, call),
      capture: (value) => this.toStoredResponse(context, value, call.options),
      rollback: () => this.rollbackQuietly(attempt),
      failure: (error) => this.databaseError(context, error, call.options),
      notStored: () => this.warnOnce(consumer, warnings.streamNotStored(consumer)),
      lostRace: () => this.afterLostRace(call, answer, inFlight),
      keepFailure: (error) => keepFailure(this.idempotency, call, error, answer, this.logger),
    });
  }

  /**
   * The serialized response: what the client receives (class instances go through class-transformer's
   * `instanceToPlain`, as `ClassSerializerInterceptor` would, so `@Exclude()`d fields are never stored), the
   * route's status code and the `replayHeaders` already set. Undefined for a stream (not replayable).
   */
  protected toStoredResponse(
    context: ExecutionContext,
    value: unknown,
    options: ResolvedIdempotentOptions,
  ): StoredResponse | undefined {
    return captureResponse(this.reflector, context, value, options);
  }

  /** The exception to throw for a refused request (answered as problem+json by `IdempotencyProblemFilter`). */
  protected reject(context: ExecutionContext, problem: IdempotencyProblemException): IdempotencyProblemException {
    reportIdempotencyOutcome(outcomeOfStatus(problem.problem.status), this.optionsOf(context), 'http');
    return problem;
  }
}
