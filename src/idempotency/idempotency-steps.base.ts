import { ExecutionContext, Logger } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { type IdempotencyAttempt, rollbackQuietly } from './held-attempt';
import { boundedText, scopeFromOption } from './fingerprint';
import { HandlerOptionsResolver } from './handler-options';
import type { StoredIdempotencyRecord } from '../dialects/key-store';
import * as warnings from './idempotency.problems';
import type { HandlerBody, IdempotentCall, ResolvedIdempotentOptions } from './idempotency.options';
import { IdempotencyService } from './idempotency.service';
import { withSteps } from './steps/idempotent-step';

/**
 * The steps `IdempotencyInterceptor` shares between HTTP requests and messages: the handler's options, the call's
 * scope, the handler's run in the attempt, the rollback, a lost race and the warnings. Steps are `protected`, for
 * the interceptor's own classes and the library's tests (not an extension point: see `IdempotencyInterceptor`).
 */
export abstract class IdempotencySteps {
  protected readonly logger = new Logger('Idempotency');
  private readonly handlerOptions: HandlerOptionsResolver;
  private readonly warned = new warnings.FirstTimes();

  constructor(
    protected readonly reflector: Reflector,
    protected readonly idempotency: IdempotencyService,
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

  /** Runs the handler (`handler` calls it) with the attempt's transaction ambient, and resolves with its value. */
  protected runHandler(handler: HandlerBody, attempt: IdempotencyAttempt): Promise<unknown> {
    return attempt.run(handler);
  }

  /** `runHandler` with the call's steps (`idempotentStep()`) reachable from the handler. */
  protected runWithSteps(handler: HandlerBody, attempt: IdempotencyAttempt, call: IdempotentCall): Promise<unknown> {
    const steps = () => this.idempotency.steps;
    return withSteps(steps, call, attempt, (marked) => this.runHandler(handler, marked));
  }

  /** Rolls back after the handler failed; a rollback that fails too is logged, so the handler's error is answered. */
  protected rollbackQuietly(attempt: IdempotencyAttempt): Promise<void> {
    return rollbackQuietly(attempt, this.logger);
  }

  /** Another request committed the key first (the unique constraint fired): answer with its record. */
  protected async afterLostRace<T>(
    call: IdempotentCall,
    answer: (record: StoredIdempotencyRecord) => T,
    gone: () => T,
  ): Promise<T> {
    const record = await this.idempotency.read(call.scope, call.key);
    return record ? answer(record) : gone();
  }

  /** The scope of a call: the `scope` option, else `fallback` (HTTP: `defaultHttpScope`; messages: the consumer). */
  protected scopeOf(
    context: ExecutionContext,
    options: ResolvedIdempotentOptions,
    fallback: string,
  ): string | Promise<string> {
    return scopeFromOption(context, options, fallback);
  }

  /** Keeps a scope or message key within the column's 255 characters (longer ones are hashed). */
  protected boundedText(text: string): string {
    return boundedText(text);
  }

  /** Module defaults ← class options ← method options, resolved once per handler. */
  protected optionsOf(context: ExecutionContext): ResolvedIdempotentOptions {
    return this.handlerOptions.resolve(context);
  }

  /** Logs `message` as a warning the first time it is about `about` (a handler, or a handler and a topic). */
  protected warnOnce(about: string, message: string): void {
    if (this.warned.first(about)) this.logger.warn(message);
  }
}
