import type { ExecutionContext } from '@nestjs/common';
import { OutboxConfigurationError } from '../errors';
import type { Reflector } from '@nestjs/core';
import type { ResolvedIdempotentOptions } from './idempotent-call.types';
import { IDEMPOTENT_OPTIONS } from './idempotency.constants';
import type { IdempotentOptions, ResolvedIdempotencyDefaults } from './idempotency.options';
import { resolveIdempotencyDefaults } from './idempotency.options-validation';

/**
 * The options of each `@Idempotent()` handler: the module's `idempotency` defaults ← the controller's options ← the
 * method's, checked and resolved once per handler (the call-specific functions `scope`, `key` and `fingerprint`
 * are taken as given).
 */
export class HandlerOptionsResolver {
  /** Per handler function. */
  private readonly resolved = new WeakMap<object, ResolvedIdempotentOptions>();

  /**
   * `defaults` is read when a handler is first resolved (the module's `idempotency` options); `dataSource` names
   * the DataSource the records go to.
   */
  constructor(
    private readonly reflector: Reflector,
    private readonly defaults: () => ResolvedIdempotencyDefaults,
    private readonly dataSource: () => string = () => 'default',
    /** `manualAck` of a handler from the one given (undefined: not set): `RpcServers.ackModeOf`. */
    private readonly ackMode: (consumer: string, handler: Function, given: boolean | undefined) => boolean = (
      _consumer,
      _handler,
      given,
    ) => given ?? false,
  ) {}

  /** The resolved options of the context's handler (cached per handler). */
  resolve(context: ExecutionContext): ResolvedIdempotentOptions {
    const handler = context.getHandler();
    let resolved = this.resolved.get(handler);
    if (!resolved) {
      resolved = this.merge(context);
      this.resolved.set(handler, resolved);
    }
    return resolved;
  }

  private merge(context: ExecutionContext): ResolvedIdempotentOptions {
    const controller = context.getClass();
    const handler = context.getHandler();
    const merged: IdempotentOptions = {
      ...(this.reflector.get<IdempotentOptions>(IDEMPOTENT_OPTIONS, controller) ?? {}),
      ...(this.reflector.get<IdempotentOptions>(IDEMPOTENT_OPTIONS, handler) ?? {}),
    };
    const { scope, key, fingerprint, dataSource: _dataSource, mode = 'process', ...defaults } = merged;
    let base = resolveIdempotencyDefaults(
      Object.fromEntries(Object.entries(defaults).filter(([, v]) => v !== undefined)),
      this.defaults(),
    );
    if (mode !== 'process' && mode !== 'accept-first') {
      throw new OutboxConfigurationError(
        `OutboxModule option \`mode\` must be 'process' or 'accept-first', got ${JSON.stringify(mode)}. ` +
          "Pass mode: 'accept-first' to ack a consumer's messages before its handler runs, or leave it out.",
      );
    }
    if (mode === 'accept-first' && !base.retry) {
      // The broker no longer redelivers an accepted message: its row must be retried, with the defaults if need be.
      if (merged.retry === false) {
        throw new OutboxConfigurationError(
          "OutboxModule option `retry: false` contradicts mode: 'accept-first': the message is acked before its " +
            'handler runs, so only the retries of its inbox row can run it again after a failure. Leave `retry` ' +
            'out (the default retry options) or give a policy, or drop `accept-first`.',
        );
      }
      base = resolveIdempotencyDefaults({ retry: true }, base);
    }
    const consumer = `${controller.name}.${handler.name}`;
    return {
      ...base,
      mode,
      manualAck: this.ackMode(consumer, handler, base.manualAck),
      scope,
      key,
      fingerprint,
      headerKey: base.header.toLowerCase(),
      consumer,
      dataSource: this.dataSource(),
    };
  }
}
