import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  CallHandler,
  ExecutionContext,
  HttpStatus,
  Injectable,
  Logger,
  NestInterceptor,
  StreamableFile,
} from '@nestjs/common';
import { HTTP_CODE_METADATA } from '@nestjs/common/constants';
import { Reflector } from '@nestjs/core';
import { RmqContext, RpcException } from '@nestjs/microservices';
import { PATTERN_HANDLER_METADATA } from '@nestjs/microservices/constants';
import { lastValueFrom, Observable, of } from 'rxjs';
import { getOutboxMessageId } from '../transports/incoming-message-id';
import { toPlain } from './class-transformer.loader';
import { outcomeOfStatus, reportIdempotencyOutcome } from '../events/idempotency-channel';
import { isDatabaseUnavailable } from './database-unavailable';
import { fingerprintOf } from './fingerprint';
import { rememberIdempotencyKey } from './idempotency-key.decorator';
import type { IdempotencyAttempt, StoredIdempotencyRecord } from './idempotency-store';
import { IDEMPOTENT_OPTIONS } from './idempotency.constants';
import { IdempotencyService } from './idempotency.service';
import {
  IDEMPOTENT_REPLAYED_HEADER,
  IdempotentOptions,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  ResolvedIdempotencyDefaults,
} from './idempotency.options';
import { resolveIdempotencyDefaults } from './idempotency.options-validation';
import {
  databaseUnavailableProblem,
  IdempotencyProblemException,
  inFlightProblem,
  invalidKeyProblem,
  missingKeyProblem,
  nestedTooDeeplyProblem,
  reusedKeyProblem,
} from './idempotency.problems';
import { describeError } from '../util/describe-error';
import { JsonNestingTooDeepError, MAX_JSON_DEPTH } from './stable-json';

/** The options of one handler: module defaults ← class ← method. */
export type ResolvedIdempotentOptions = ResolvedIdempotencyDefaults &
  Pick<IdempotentOptions, 'scope' | 'key' | 'fingerprint'> & {
    /** Lower-case header name. */
    headerKey: string;
    /** 'Controller.method', the default scope of message handlers. */
    consumer: string;
  };

/** The response that is stored and replayed. */
export interface StoredResponse {
  status: number | null;
  /** JSON text, or null for "no body". */
  body: string | null;
  /** JSON text of the replayed headers, or null. */
  headers: string | null;
}

/** What identifies one idempotent call. */
export interface IdempotentCall {
  scope: string;
  key: string;
  fingerprint: string;
  options: ResolvedIdempotentOptions;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Handlers already guarded, per request (HTTP) or transport context (messages), by an outer application. */
const guarded = new WeakMap<object, Set<Function>>();

/**
 * The interceptor behind `@Idempotent()`. Every step is `protected`: extend the class, override a step
 * (`scopeOf`, `principalOf`, `fingerprintHttp`, `toStoredResponse`, `replay`, `skipDuplicate`, …) and apply it with
 * `applyDecorators(SetMetadata(IDEMPOTENT_OPTIONS, options), UseInterceptors(MyInterceptor))`.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  protected readonly logger = new Logger('Idempotency');
  private readonly resolved = new WeakMap<Function, ResolvedIdempotentOptions>();
  private readonly warned = new Set<string>();

  constructor(
    protected readonly reflector: Reflector,
    protected readonly idempotency: IdempotencyService,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> | Promise<Observable<unknown>> {
    const type = context.getType();
    if (type !== 'http' && type !== 'rpc') return next.handle();
    // `@Idempotent()` on a controller and on its method applies the interceptor twice: the outer one guards.
    const holder = type === 'http' ? context.switchToHttp().getRequest() : context.switchToRpc().getContext();
    if (typeof holder === 'object' && holder !== null) {
      // Per handler: two handlers of one message share its transport context, and each is guarded.
      const handler = context.getHandler();
      let handlers = guarded.get(holder);
      if (!handlers) guarded.set(holder, (handlers = new Set()));
      if (handlers.has(handler)) return next.handle();
      handlers.add(handler);
    }
    return type === 'http' ? this.interceptHttp(context, next) : this.interceptRpc(context, next);
  }

  // ---------------------------------------------------------------------------------------------------- HTTP

  protected async interceptHttp(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const options = this.optionsOf(context);
    const request = context.switchToHttp().getRequest();
    // Safe methods are idempotent by definition (a class-level @Idempotent() must not demand keys for reads).
    if (SAFE_METHODS.has(request.method)) return next.handle();
    const key = this.readHttpKey(context, request, options);
    if (key === undefined) {
      if (options.required) throw this.reject(context, missingKeyProblem(options.header));
      return next.handle();
    }
    this.checkHttpKey(context, key, options);
    const call: IdempotentCall = {
      key,
      scope: this.boundedText(await this.scopeOf(context, options, await this.defaultHttpScope(context, options))),
      fingerprint: this.fingerprintOrReject(context, () => this.fingerprintHttp(context, request, options)),
      options,
    };
    rememberIdempotencyKey(context, key);
    const begun = await this.idempotency.begin(call.scope, call.key, call.fingerprint).catch((error: unknown) => {
      throw this.databaseError(context, error, options);
    });
    if (begun.kind === 'stored') return this.answerStoredHttp(context, begun.record, call);
    if (begun.kind === 'in-flight') {
      // A different request with the key wins over "in flight": 422 rather than 409.
      throw this.reject(context, begun.sameRequest ? inFlightProblem(options.header, options.retryAfter) : reusedKeyProblem(options.header));
    }
    return this.runFirstHttp(context, next, begun.attempt, call);
  }

  /** The key from the header (or the custom extractor); undefined when absent. */
  protected readHttpKey(context: ExecutionContext, request: any, options: ResolvedIdempotentOptions): string | undefined {
    const raw = options.key ? options.key(request, context) : request.headers?.[options.headerKey];
    if (raw === undefined || raw === null) return undefined;
    return Array.isArray(raw) ? raw.join(', ') : String(raw);
  }

  /**
   * The scope of an HTTP key when the `scope` option gives none: the principal (`principalOf`), else `''` — shared by
   * every client, which is warned about once per route that has no `scope` option either.
   */
  protected async defaultHttpScope(context: ExecutionContext, options: ResolvedIdempotentOptions): Promise<string> {
    const principal = await this.principalOf(context);
    if (principal !== undefined) return principal;
    if (!options.scope) {
      this.warnOnce(
        `${options.consumer} principal`,
        `${options.consumer} ran without a principal (no request.user with an id or sub) and without a ` +
          '`scope` option, so its idempotency keys are shared by every client: a client that sends another ' +
          "client's key and body receives that client's stored response. Put the authentication guard before " +
          'it, or pass @Idempotent({ scope: (context) => … }) (e.g. a tenant or API-key id).',
      );
    }
    return '';
  }

  /**
   * The authenticated principal of a request, which HTTP keys are scoped to by default: `request.user.id`, else
   * `request.user.sub` (as Passport strategies and JWT guards set them), as a string; undefined when there is
   * none. Override it to scope by another field (as @nestjs/throttler's `getTracker`).
   */
  protected principalOf(context: ExecutionContext): string | undefined | Promise<string | undefined> {
    const user = context.switchToHttp().getRequest()?.user;
    if (typeof user !== 'object' || user === null) return undefined;
    const id = user.id ?? user.sub;
    if (id === undefined || id === null) return undefined;
    const text = String(id);
    return text.length > 0 ? text : undefined;
  }

  /** 400 for an empty key or one over 255 characters. */
  protected checkHttpKey(context: ExecutionContext, key: string, options: ResolvedIdempotentOptions): void {
    if (key.trim().length === 0 || key.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
      throw this.reject(context, invalidKeyProblem(options.header, MAX_IDEMPOTENCY_KEY_LENGTH, key.length));
    }
  }

  /** The fingerprint, or 400 problem+json when the request is nested deeper than `MAX_JSON_DEPTH` levels. */
  protected fingerprintOrReject(context: ExecutionContext, fingerprint: () => string): string {
    try {
      return fingerprint();
    } catch (error) {
      if (error instanceof JsonNestingTooDeepError) throw this.reject(context, nestedTooDeeplyProblem(MAX_JSON_DEPTH));
      throw error;
    }
  }

  /**
   * A database error of the key-taking steps, the handler or the commit: when the database is unreachable (see
   * `isDatabaseUnavailable`) a 503 problem+json with `Retry-After` (the transaction is gone, so nothing was applied,
   * or a commit's outcome is unknown and a retry with the same key finds out); any other error as it is.
   */
  protected databaseError(context: ExecutionContext, error: unknown, options: ResolvedIdempotentOptions): unknown {
    if (error instanceof IdempotencyProblemException || !isDatabaseUnavailable(error)) return error;
    this.logger.debug(`The database is unreachable (${describeError(error)}): answered 503.`);
    return this.reject(context, databaseUnavailableProblem(options.header, options.retryAfter));
  }

  /** Default fingerprint: method, path, query and body (key-order independent). */
  protected fingerprintHttp(context: ExecutionContext, request: any, options: ResolvedIdempotentOptions): string {
    if (options.fingerprint) return fingerprintOf(options.fingerprint(request, context));
    const url: string = request.originalUrl ?? request.url ?? '';
    const query = url.indexOf('?');
    return fingerprintOf(request.method, query === -1 ? url : url.slice(0, query), request.query ?? null, request.body ?? null);
  }

  /** A completed record: replay it, or 422 when it was written for a different request. */
  protected answerStoredHttp(context: ExecutionContext, record: StoredIdempotencyRecord, call: IdempotentCall): Observable<unknown> {
    if (record.fingerprint !== call.fingerprint) throw this.reject(context, reusedKeyProblem(call.options.header));
    return this.replay(context, record);
  }

  /** Sends the stored response again, marked `Idempotent-Replayed: true`. The handler does not run. */
  protected replay(context: ExecutionContext, record: StoredIdempotencyRecord): Observable<unknown> {
    reportIdempotencyOutcome('replayed', this.optionsOf(context).consumer, 'http');
    const response = context.switchToHttp().getResponse();
    setHeader(response, IDEMPOTENT_REPLAYED_HEADER, 'true');
    if (record.headers) {
      for (const [name, value] of Object.entries(JSON.parse(record.headers) as Record<string, string | string[]>)) {
        setHeader(response, name, value);
      }
    }
    if (record.status !== null && typeof response.status === 'function') response.status(record.status);
    return of(record.body === null ? undefined : JSON.parse(record.body));
  }

  /** The winner: runs the handler in the transaction, stores what the client receives, commits. */
  protected async runFirstHttp(context: ExecutionContext, next: CallHandler, attempt: IdempotencyAttempt, call: IdempotentCall): Promise<Observable<unknown>> {
    const mapped = (error: unknown) => this.databaseError(context, error, call.options);
    let value: unknown;
    let stored: StoredResponse | undefined;
    try {
      value = await this.runHandler(next, attempt);
      stored = this.toStoredResponse(context, value, call.options);
    } catch (error) {
      await this.rollbackQuietly(attempt);
      throw mapped(error);
    }
    try {
      if (!stored) {
        this.warnOnce(call.options.consumer, `${call.options.consumer} returned a stream, which cannot be stored or replayed: its effect was committed without an idempotency record, so a retry runs it again. Return a JSON body from idempotent handlers.`);
        await attempt.commitWithoutRecord();
        return of(value);
      }
      if (await attempt.commit({ fingerprint: call.fingerprint, ttl: call.options.ttl, ...stored })) {
        reportIdempotencyOutcome('executed', call.options.consumer, 'http');
        return of(value);
      }
      return await this.afterLostRace(call, (record) => this.answerStoredHttp(context, record, call), () => {
        throw this.reject(context, inFlightProblem(call.options.header, call.options.retryAfter));
      });
    } catch (error) {
      throw mapped(error);
    }
  }

  /**
   * The serialized response: what the client receives (class instances go through class-transformer's
   * `instanceToPlain`, as `ClassSerializerInterceptor` would, so `@Exclude()`d fields are never stored), the
   * route's status code and the `replayHeaders` already set. Undefined for a stream (not replayable).
   */
  protected toStoredResponse(context: ExecutionContext, value: unknown, options: ResolvedIdempotentOptions): StoredResponse | undefined {
    if (value instanceof StreamableFile || value instanceof Readable || Buffer.isBuffer(value)) return undefined;
    const response = context.switchToHttp().getResponse();
    const request = context.switchToHttp().getRequest();
    const status =
      this.reflector.get<number | undefined>(HTTP_CODE_METADATA, context.getHandler()) ??
      (request.method === 'POST' ? HttpStatus.CREATED : HttpStatus.OK);
    let headers: Record<string, unknown> | null = null;
    for (const name of options.replayHeaders) {
      const header = getHeader(response, name);
      if (header !== undefined) (headers ??= {})[name] = header;
    }
    return { status, body: serializeBody(value), headers: headers ? JSON.stringify(headers) : null };
  }

  /** The exception to throw for a refused request (answered as problem+json by `IdempotencyProblemFilter`). */
  protected reject(context: ExecutionContext, problem: IdempotencyProblemException): IdempotencyProblemException {
    reportIdempotencyOutcome(outcomeOfStatus(problem.problem.status), this.optionsOf(context).consumer, 'http');
    return problem;
  }

  // ---------------------------------------------------------------------------------------------------- messages

  protected async interceptRpc(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const options = this.optionsOf(context);
    const data = context.switchToRpc().getData();
    const key = options.key ? options.key(data, context) : getOutboxMessageId(context);
    if (typeof key !== 'string' || key.length === 0) {
      this.warnOnce(
        options.consumer,
        `${options.consumer} received a message without an id: it ran in a transaction without an idempotency ` +
          "record, so a redelivery runs it again. Messages from this library's outbox carry one (TCP/Redis " +
          'consumers need OutboxEnvelopeDeserializer); for other producers pass ' +
          '@Idempotent({ key: (data, context) => … }).',
      );
      return this.runWithoutRecordRpc(context, next, options);
    }
    const call: IdempotentCall = {
      key: this.boundedText(key),
      scope: this.boundedText(await this.scopeOf(context, options, options.consumer)),
      fingerprint: this.messageFingerprint(context, data, options),
      options,
    };
    rememberIdempotencyKey(context, key);
    const begun = await this.idempotency.begin(call.scope, call.key, call.fingerprint);
    if (begun.kind === 'stored') return this.skipDuplicate(context, begun.record, call);
    if (begun.kind === 'in-flight') return this.deferInFlight(context, call);
    return this.runFirstRpc(context, next, begun.attempt, call);
  }

  /**
   * The fingerprint of a message's data (it only tells a redelivery with different data apart, for a warning). Data
   * nested more than `MAX_JSON_DEPTH` levels deep gets a fixed fingerprint, with a warning: the message id decides.
   */
  protected messageFingerprint(context: ExecutionContext, data: unknown, options: ResolvedIdempotentOptions): string {
    try {
      return fingerprintOf(options.fingerprint ? options.fingerprint(data, context) : data);
    } catch (error) {
      if (!(error instanceof JsonNestingTooDeepError)) throw error;
      this.warnOnce(`${options.consumer} depth`, `${options.consumer} received data nested more than ${MAX_JSON_DEPTH} levels deep: it is deduplicated by message id only.`);
      return fingerprintOf('data nested too deeply');
    }
  }

  /** The first delivery: runs the handler in the transaction with the record; settles the message after commit. */
  protected async runFirstRpc(context: ExecutionContext, next: CallHandler, attempt: IdempotencyAttempt, call: IdempotentCall): Promise<Observable<unknown>> {
    let value: unknown;
    let body: string | null;
    try {
      value = await this.runHandler(next, attempt);
      body = serializeBody(value);
    } catch (error) {
      await this.rollbackQuietly(attempt);
      this.settle(context, call.options, 'requeue');
      throw error;
    }
    if (await attempt.commit({ fingerprint: call.fingerprint, ttl: call.options.ttl, status: null, body, headers: null })) {
      reportIdempotencyOutcome('executed', call.options.consumer, 'rpc');
      this.settle(context, call.options, 'ack');
      return of(value);
    }
    return this.afterLostRace(call, (record) => this.skipDuplicate(context, record, call), () => this.deferInFlight(context, call));
  }

  /**
   * A message without an id: the handler runs in a transaction of its own, without a record (nothing to deduplicate
   * by), and the message is settled like any other — acked after the commit, requeued when the handler or the
   * commit fails.
   */
  protected async runWithoutRecordRpc(
    context: ExecutionContext,
    next: CallHandler,
    options: ResolvedIdempotentOptions,
  ): Promise<Observable<unknown>> {
    let value: unknown;
    try {
      // next.handle() is called inside the transaction's async context, so the handler's writes join it.
      value = await this.idempotency.transaction(() => lastValueFrom(next.handle(), { defaultValue: undefined }));
    } catch (error) {
      this.settle(context, options, 'requeue');
      throw error;
    }
    this.settle(context, options, 'ack');
    return of(value);
  }

  /** A redelivery of a handled message: the handler does not run; a `@MessagePattern` gets the stored response. */
  protected skipDuplicate(context: ExecutionContext, record: StoredIdempotencyRecord, call: IdempotentCall): Observable<unknown> {
    if (record.fingerprint !== call.fingerprint) {
      this.logger.warn(`${call.scope}: message ${call.key} was already handled with different data; the new data is ignored (the message id decides).`);
    } else {
      this.logger.debug(`${call.scope}: skipped message ${call.key}, already handled.`);
    }
    reportIdempotencyOutcome('duplicate_skipped', call.options.consumer, 'rpc');
    this.settle(context, call.options, 'ack');
    return of(record.body === null ? undefined : JSON.parse(record.body));
  }

  /**
   * The same message is being handled right now (a redelivery racing the first delivery). The first one will
   * commit or roll back; this one is requeued after `retryAfter` seconds (manual-ack RabbitMQ), refused
   * (`@MessagePattern`, so the caller can retry) or skipped with a warning.
   */
  protected deferInFlight(context: ExecutionContext, call: IdempotentCall): Observable<unknown> {
    reportIdempotencyOutcome('in_flight', call.options.consumer, 'rpc');
    if (this.isMessagePattern(context)) {
      throw new RpcException({ status: 'error', code: 'idempotency-key-in-use', message: `Message ${call.key} is being handled right now; retry later.` });
    }
    if (this.settle(context, call.options, 'requeue')) {
      this.logger.debug(`${call.scope}: message ${call.key} is being handled right now; requeued in ${call.options.retryAfter} s.`);
    } else {
      this.logger.warn(`${call.scope}: message ${call.key} arrived again while its first delivery was still being handled; skipped.`);
    }
    return of(undefined);
  }

  /**
   * With `manualAck` (RabbitMQ, `noAck: false`) acknowledges the message, or requeues it after `retryAfter` seconds.
   * Returns whether it did anything.
   */
  protected settle(context: ExecutionContext, options: ResolvedIdempotentOptions, how: 'ack' | 'requeue'): boolean {
    if (!options.manualAck) return false;
    const rpc = context.switchToRpc().getContext();
    if (!(rpc instanceof RmqContext)) return false;
    const channel = rpc.getChannelRef();
    const message = rpc.getMessage();
    if (how === 'ack') {
      try {
        channel.ack(message);
      } catch (error) {
        // The channel closed (shutdown, broker restart): the broker redelivers the message, and the record skips it.
        this.logger.warn(`Could not acknowledge message: ${describeError(error)}; it will be redelivered and skipped.`);
      }
    } else {
      const timer = setTimeout(() => {
        try {
          channel.nack(message, false, true);
        } catch (error) {
          this.logger.warn(`Could not requeue message: ${describeError(error)}`);
        }
      }, options.retryAfter * 1000);
      timer.unref?.();
    }
    return true;
  }

  protected isMessagePattern(context: ExecutionContext): boolean {
    return this.reflector.get<number | undefined>(PATTERN_HANDLER_METADATA, context.getHandler()) === 1;
  }

  // ---------------------------------------------------------------------------------------------------- shared

  /** Runs the handler with the attempt's transaction ambient, and resolves with its last value. */
  protected runHandler(next: CallHandler, attempt: IdempotencyAttempt): Promise<unknown> {
    // next.handle() binds the async context it is called in: call it inside the transaction's context.
    return attempt.run(() => lastValueFrom(next.handle(), { defaultValue: undefined }));
  }

  /**
   * Rolls back after the handler failed. A rollback that fails too (the connection died: the server has already
   * discarded the transaction) is logged, so the handler's own error is the one answered.
   */
  protected async rollbackQuietly(attempt: IdempotencyAttempt): Promise<void> {
    try {
      await attempt.rollback();
    } catch (error) {
      this.logger.warn(`Rollback failed: ${describeError(error)}`);
    }
  }

  /** Another request committed the key first (the unique constraint fired): answer with its record. */
  protected async afterLostRace<T>(call: IdempotentCall, answer: (record: StoredIdempotencyRecord) => T, gone: () => T): Promise<T> {
    const record = await this.idempotency.store.read(call.scope, call.key);
    return record ? answer(record) : gone();
  }

  /** The scope of a call: the `scope` option, else `fallback` (HTTP: `defaultHttpScope`; messages: the consumer). */
  protected scopeOf(context: ExecutionContext, options: ResolvedIdempotentOptions, fallback: string): string | Promise<string> {
    if (!options.scope) return fallback;
    const scope = options.scope(context);
    if (scope instanceof Promise) return scope.then((s) => (s === undefined || s === null ? fallback : String(s)));
    return scope === undefined || scope === null ? fallback : String(scope);
  }

  /** Keeps a scope or message key within the column's 255 characters (longer ones are hashed). */
  protected boundedText(text: string): string {
    return text.length <= MAX_IDEMPOTENCY_KEY_LENGTH ? text : `sha256:${createHash('sha256').update(text).digest('hex')}`;
  }

  /** Module defaults ← class options ← method options, resolved once per handler. */
  protected optionsOf(context: ExecutionContext): ResolvedIdempotentOptions {
    const handler = context.getHandler();
    let resolved = this.resolved.get(handler);
    if (!resolved) {
      const controller = context.getClass();
      const merged: IdempotentOptions = {
        ...(this.reflector.get<IdempotentOptions>(IDEMPOTENT_OPTIONS, controller) ?? {}),
        ...(this.reflector.get<IdempotentOptions>(IDEMPOTENT_OPTIONS, handler) ?? {}),
      };
      const { scope, key, fingerprint, ...defaults } = merged;
      const base = resolveIdempotencyDefaults(
        Object.fromEntries(Object.entries(defaults).filter(([, v]) => v !== undefined)),
        this.idempotency.defaults,
      );
      resolved = {
        ...base,
        scope,
        key,
        fingerprint,
        headerKey: base.header.toLowerCase(),
        consumer: `${controller.name}.${handler.name}`,
      };
      this.resolved.set(handler, resolved);
    }
    return resolved;
  }

  protected warnOnce(about: string, message: string): void {
    if (this.warned.has(about)) return;
    this.warned.add(about);
    this.logger.warn(message);
  }
}

/** JSON text of what the client receives, or null for no body. */
function serializeBody(value: unknown): string | null {
  if (value === undefined) return null;
  return JSON.stringify(toPlain(value)) ?? null;
}

function setHeader(response: any, name: string, value: string | string[]): void {
  if (typeof response.header === 'function') response.header(name, value);
  else response.setHeader(name, value);
}

function getHeader(response: any, name: string): unknown {
  return typeof response.getHeader === 'function' ? response.getHeader(name) : undefined;
}
