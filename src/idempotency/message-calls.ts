import type { CallHandler, ExecutionContext } from '@nestjs/common';
import { lastValueFrom, Observable, of } from 'rxjs';
import { reportIdempotencyOutcome } from '../events/idempotency-channel';
import { storeAcceptedMessage, storeFailedMessage } from './message-inbox';
import { rememberIdempotencyKey } from './call-marks';
import type { StoredIdempotencyRecord } from '../dialects/key-store';
import type { IdempotencyAttempt, IdempotencyService } from './idempotency.service';
import { type CallSteps, scopeFromOption } from './call-steps';
import { boundedText } from './fingerprint';
import * as warnings from './idempotency.problems';
import type { HandlerBody, IdempotentCall, ResolvedIdempotentOptions } from './idempotency.options';
import { fingerprintMessage, readMessageKey } from './message-settlement';
import * as settlement from './message-settlement';
import { parseBody, serializeBody } from './http-request';

/**
 * The message side of `IdempotencyInterceptor` (`@EventPattern`, `@MessagePattern`): the message's key, its record
 * taken once, the handler's first delivery, a duplicate skipped, a message in flight deferred, a failed message
 * kept for retries and an accepted one stored first (`mode: 'accept-first'`), and the broker message settled
 * (`message-settlement.ts`).
 */
export class MessageCalls {
  constructor(private readonly steps: CallSteps) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const key = this.messageKeyOf(context);
    // next.handle() binds the async context it is called in: it is called inside the transaction's context.
    return of(await this.handleMessage(context, key, () => lastValueFrom(next.handle(), { defaultValue: undefined })));
  }

  /** The message's key (`key` option, else the outbox id), remembered for `@IdempotencyKey()`; may be empty. */
  private messageKeyOf(context: ExecutionContext): string | undefined {
    // The data is argument 0, read by index as `switchToRpc()` would, without the closures it builds on every call.
    const key = readMessageKey(context, context.getArgByIndex(0), this.steps.optionsOf(context));
    if (typeof key === 'string' && key.length > 0) rememberIdempotencyKey(context, key);
    return key;
  }

  /**
   * Guards one message: `handler` (which runs the handler's body) runs once per `key`, in a transaction with the
   * key's record; a redelivery is skipped (a `@MessagePattern` gets the stored response). Resolves with what the
   * caller receives.
   */
  private async handleMessage(
    context: ExecutionContext,
    key: string | undefined,
    handler: HandlerBody,
  ): Promise<unknown> {
    const options = this.steps.optionsOf(context);
    if (typeof key !== 'string' || key.length === 0) {
      this.steps.warnOnce(options.consumer, warnings.messageWithoutId(options.consumer));
      return this.runWithoutRecordRpc(context, handler, options);
    }
    // Awaited only when the `scope` option answers with a promise: an await of a plain string costs a promise hop.
    const scope = scopeFromOption(context, options, options.consumer);
    const call: IdempotentCall = {
      key: boundedText(key),
      scope: boundedText(typeof scope === 'string' ? scope : await scope),
      fingerprint: this.messageFingerprint(context, context.getArgByIndex(0), options),
      options,
    };
    if (options.mode === 'accept-first' && !this.isMessagePattern(context)) return this.acceptMessage(context, call);
    let begun: Awaited<ReturnType<IdempotencyService['begin']>>;
    try {
      begun = await this.steps.idempotency.begin(call.scope, call.key, call.fingerprint, options, { ttl: options.ttl });
    } catch (error) {
      // The key could not be taken (no connection in time, the database away): nothing ran, so the message goes
      // back to the broker, or it would stay unacknowledged on the channel and never be delivered again.
      this.settle(context, options, 'requeue');
      throw error;
    }
    if (begun.kind === 'stored') return this.skipDuplicate(context, begun.record, call);
    if (begun.kind === 'in-flight') return this.deferInFlight(context, call);
    return this.runFirstRpc(context, handler, begun.attempt, call);
  }

  /** The fingerprint of a message's data (for a warning: the id decides); fixed, with a warning, if nested too deep. */
  private messageFingerprint(context: ExecutionContext, data: unknown, options: ResolvedIdempotentOptions): string {
    const { consumer } = options;
    return fingerprintMessage(context, data, options, () =>
      this.steps.warnOnce(`${consumer} depth`, warnings.nestedData(consumer)),
    );
  }

  /**
   * The first delivery: runs the handler in the key's transaction and commits its effect with the record (the
   * handler's value as its body, for a `@MessagePattern` redelivery), then acks the message. A handler that fails
   * rolls back; the message is then stored for the relay's retries and acked (`@Idempotent({ retry })`), else
   * requeued. When a redelivery committed the message first, this one is skipped as its duplicate.
   */
  private async runFirstRpc(
    context: ExecutionContext,
    handler: HandlerBody,
    attempt: IdempotencyAttempt,
    call: IdempotentCall,
  ): Promise<unknown> {
    const { fingerprint, options } = call;
    let value: unknown;
    let body: string | null;
    try {
      value = await this.steps.run(handler, attempt, call);
      body = serializeBody(value);
    } catch (error) {
      await this.steps.rollback(attempt);
      reportIdempotencyOutcome('failed', options, 'rpc');
      const kept = await this.keepFailedMessage(context, call, error);
      this.settle(context, options, kept ? 'ack' : 'requeue');
      if (kept) return undefined;
      throw error;
    }
    if (await attempt.commit({ fingerprint, ttl: options.ttl, status: null, body, headers: null })) {
      reportIdempotencyOutcome('executed', options, 'rpc');
      this.settle(context, options, 'ack');
      return value;
    }
    const skip = (record: StoredIdempotencyRecord) => this.skipDuplicate(context, record, call);
    return this.steps.afterLostRace(call, skip, () => this.deferInFlight(context, call));
  }

  /**
   * A failed `@EventPattern` message under `@Idempotent({ retry })`: stored as an inbox row for the relay's retries
   * (`message-inbox.ts`); whether it was. Never for a `@MessagePattern` (its caller gets the error).
   */
  private keepFailedMessage(context: ExecutionContext, call: IdempotentCall, error: unknown): Promise<boolean> {
    if (!call.options.retry || this.isMessagePattern(context)) return Promise.resolve(false);
    return storeFailedMessage(this.steps.idempotency.inbox, context, call, error, this.steps.logger);
  }

  /**
   * `mode: 'accept-first'`: stores the message as an inbox row (`message-inbox.ts`) instead of running the
   * handler, then acks it; the relay runs the handler from the row. A redelivery of a message whose row exists stores
   * nothing and is acked. When the row cannot be stored the message is requeued (with `manualAck`) and the error
   * goes to the transport, as a failure to take the key does.
   */
  private async acceptMessage(context: ExecutionContext, call: IdempotentCall): Promise<undefined> {
    let stored: 'stored' | 'already';
    try {
      stored = await storeAcceptedMessage(this.steps.idempotency.inbox, context, call, this.steps.logger);
    } catch (error) {
      this.settle(context, call.options, 'requeue');
      throw error;
    }
    reportIdempotencyOutcome(stored === 'stored' ? 'accepted' : 'duplicate_skipped', call.options, 'rpc');
    this.settle(context, call.options, 'ack');
    return undefined;
  }

  /** A message without an id: its own transaction, no record; acked after the commit, requeued if anything fails. */
  private async runWithoutRecordRpc(
    context: ExecutionContext,
    handler: HandlerBody,
    options: ResolvedIdempotentOptions,
  ): Promise<unknown> {
    let value: unknown;
    try {
      // The handler is called inside the transaction's async context, so its writes join it.
      value = await this.steps.idempotency.transaction(handler);
    } catch (error) {
      this.settle(context, options, 'requeue');
      throw error;
    }
    this.settle(context, options, 'ack');
    return value;
  }

  /** A redelivery of a handled message: the handler does not run; a `@MessagePattern` gets the stored response. */
  private skipDuplicate(context: ExecutionContext, record: StoredIdempotencyRecord, call: IdempotentCall): unknown {
    settlement.logDuplicate(this.steps.logger, record, call);
    reportIdempotencyOutcome('duplicate_skipped', call.options, 'rpc');
    this.settle(context, call.options, 'ack');
    return parseBody(record.body);
  }

  /**
   * The same message is being handled right now (a redelivery racing the first delivery). The first one will
   * commit or roll back; this one is requeued after `retryAfter` seconds (manual-ack RabbitMQ), refused
   * (`@MessagePattern`, so the caller can retry) or skipped with a warning.
   */
  private deferInFlight(context: ExecutionContext, call: IdempotentCall): undefined {
    reportIdempotencyOutcome('in_flight', call.options, 'rpc');
    if (this.isMessagePattern(context)) throw settlement.inFlightError(call.key);
    settlement.logInFlight(this.steps.logger, call, this.settle(context, call.options, 'requeue'));
    return undefined;
  }

  /** With `manualAck` (RabbitMQ) acks the message, or requeues it after `retryAfter` s; whether it did anything. */
  private settle(context: ExecutionContext, options: ResolvedIdempotentOptions, how: 'ack' | 'requeue'): boolean {
    return settlement.settle(context, options, how, this.steps.logger);
  }

  private isMessagePattern(context: ExecutionContext): boolean {
    return settlement.isMessagePattern(this.steps.reflector, context);
  }
}
