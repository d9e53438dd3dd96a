import { ExecutionContext, Logger } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { StoredIdempotencyRecord } from '../dialects/key-store';
import { HandlerOptionsResolver } from './handler-options';
import { type IdempotencyAttempt, type IdempotencyService, rollbackQuietly } from './idempotency.service';
import type { HandlerBody, IdempotentCall, ResolvedIdempotentOptions } from './idempotency.options';
import { FirstTimes } from './idempotency.problems';
import { withSteps } from './steps/idempotent-step';

/**
 * What a guarded call does the same way whether it is an HTTP request or a message: its handler's options, the
 * handler's run in the key's transaction (with its steps), the rollback after a failure, the answer after a lost
 * race, and the warnings logged once per handler. One per interceptor, used by its HTTP and message sides.
 */
export class CallSteps {
  readonly logger = new Logger('Idempotency');
  private readonly handlerOptions: HandlerOptionsResolver;
  private readonly warned = new FirstTimes();

  constructor(
    readonly reflector: Reflector,
    readonly idempotency: IdempotencyService,
  ) {
    this.handlerOptions = new HandlerOptionsResolver(
      reflector,
      () => this.idempotency.defaults,
      () => this.idempotency.dataSourceName,
      // Derived from the consumer when not given; a contradiction was refused at start-up (IdempotentOptionsCheck),
      // unless its consumer was connected after that: then it is logged here, at the handler's first message, and
      // the handler never acks on a noAck: true channel.
      (consumer, handler, given) => {
        const mode = this.idempotency.rpcServers.ackModeOf(`@Idempotent() on ${consumer}`, handler, given);
        if (mode.problem)
          this.logger.error(`${mode.problem} (found at its first message: its consumer was not known at start-up)`);
        else if (mode.unknown) this.warnOnce(`${consumer} ack mode`, mode.unknown);
        return mode.manualAck;
      },
    );
  }

  /** Module defaults ← class options ← method options, resolved once per handler. */
  optionsOf(context: ExecutionContext): ResolvedIdempotentOptions {
    return this.handlerOptions.resolve(context);
  }

  /**
   * Runs the handler (`handler` calls it) with the attempt's transaction ambient and the call's steps
   * (`idempotentStep()`) reachable from it; resolves with its value.
   */
  run(handler: HandlerBody, attempt: IdempotencyAttempt, call: IdempotentCall): Promise<unknown> {
    return withSteps(
      () => this.idempotency.steps,
      call,
      attempt,
      (marked) => marked.run(handler),
    );
  }

  /** Rolls back after the handler failed; a rollback that fails too is logged, so the handler's error is answered. */
  rollback(attempt: IdempotencyAttempt): Promise<void> {
    return rollbackQuietly(attempt, this.logger);
  }

  /** Another request committed the key first (the unique constraint fired): answer with its record. */
  async afterLostRace<T>(
    call: IdempotentCall,
    answer: (record: StoredIdempotencyRecord) => T,
    gone: () => T,
  ): Promise<T> {
    const record = await this.idempotency.read(call.scope, call.key);
    return record ? answer(record) : gone();
  }

  /** Logs `message` as a warning the first time it is about `about` (a handler, or a handler and a topic). */
  warnOnce(about: string, message: string): void {
    if (this.warned.first(about)) this.logger.warn(message);
  }
}

/** The `scope` option's value, else `fallback` (also when the option returns undefined or null). */
export function scopeFromOption(
  context: ExecutionContext,
  options: ResolvedIdempotentOptions,
  fallback: string,
): string | Promise<string> {
  if (!options.scope) return fallback;
  const scope = options.scope(context);
  if (scope instanceof Promise) return scope.then((s) => (s === undefined || s === null ? fallback : String(s)));
  return scope === undefined || scope === null ? fallback : String(scope);
}
