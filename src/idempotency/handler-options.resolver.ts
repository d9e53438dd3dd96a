import type { ExecutionContext } from '@nestjs/common';
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
    const { scope, key, fingerprint, dataSource: _dataSource, ...defaults } = merged;
    const base = resolveIdempotencyDefaults(
      Object.fromEntries(Object.entries(defaults).filter(([, v]) => v !== undefined)),
      this.defaults(),
    );
    return {
      ...base,
      scope,
      key,
      fingerprint,
      headerKey: base.header.toLowerCase(),
      consumer: `${controller.name}.${handler.name}`,
      dataSource: this.dataSource(),
    };
  }
}
