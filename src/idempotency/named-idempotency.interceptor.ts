import { Injectable, type Type } from '@nestjs/common';
import { getOutboxToken, isDefaultDataSource } from '../outbox.constants';
import { withInjectedTokens } from '../util/named-providers';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import { IdempotencyService } from './idempotency.service';

/** Per class (the interceptor, the message guard): its subclass per DataSource name. */
const variants = new Map<Function, Map<string, Type<unknown>>>();

/**
 * `type` (`IdempotencyInterceptor` or a subclass of it) for the outbox of `dataSource`: `type` itself for the
 * default DataSource, else a subclass (one per name) that is given the named outbox's `IdempotencyService`
 * (`getOutboxToken(IdempotencyService, name)`) in place of the default one. Everything else is inherited,
 * overridable steps included.
 */
export function forDataSource<T extends IdempotencyInterceptor>(
  type: Type<T>,
  dataSource: string | undefined,
): Type<T> {
  if (isDefaultDataSource(dataSource)) return type;
  const name = dataSource!;
  let named = variants.get(type);
  if (!named) variants.set(type, (named = new Map()));
  let variant = named.get(name) as Type<T> | undefined;
  if (!variant) {
    // The subclass inherits the constructor and its parameter types; only the IdempotencyService slot is redirected.
    const tokens = new Map([[IdempotencyService, getOutboxToken(IdempotencyService, name)]]);
    variant = withInjectedTokens(type, tokens, `${type.name}(${name})`);
    Injectable()(variant);
    named.set(name, variant);
  }
  return variant;
}

/** Whether `type` is `IdempotencyInterceptor` or one of its variants for a DataSource (not an app's own subclass). */
export function isIdempotencyInterceptorFor(type: unknown): boolean {
  if (type === IdempotencyInterceptor) return true;
  for (const variant of variants.get(IdempotencyInterceptor)?.values() ?? []) if (variant === type) return true;
  return false;
}

/** The interceptor of `@Idempotent({ dataSource })` (see `forDataSource`). */
export function idempotencyInterceptorFor(dataSource: string | undefined): Type<IdempotencyInterceptor> {
  return forDataSource(IdempotencyInterceptor, dataSource);
}
