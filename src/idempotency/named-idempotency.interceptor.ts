import { Inject, Injectable, type Type } from '@nestjs/common';
import { isDefaultDataSource } from '../outbox-resource-names';
import { getOutboxToken } from '../outbox.tokens';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import { IdempotencyService } from './idempotency.service';

const interceptors = new Map<string, Type<IdempotencyInterceptor>>();

/**
 * The interceptor of `@Idempotent({ dataSource })`: `IdempotencyInterceptor` itself for the default DataSource, else a
 * subclass (one per name) that is given the named outbox's `IdempotencyService` (`getOutboxToken(IdempotencyService,
 * name)`) in place of the default one. Everything else is inherited, overridable steps included.
 */
export function idempotencyInterceptorFor(dataSource: string | undefined): Type<IdempotencyInterceptor> {
  if (isDefaultDataSource(dataSource)) return IdempotencyInterceptor;
  const name = dataSource!;
  let interceptor = interceptors.get(name);
  if (!interceptor) {
    interceptor = class extends IdempotencyInterceptor {};
    Object.defineProperty(interceptor, 'name', { value: `IdempotencyInterceptor(${name})` });
    Injectable()(interceptor);
    // The subclass inherits the constructor and its parameter types; only the IdempotencyService slot is redirected.
    const paramTypes: unknown[] = Reflect.getMetadata('design:paramtypes', IdempotencyInterceptor) ?? [];
    const slot = paramTypes.indexOf(IdempotencyService);
    Inject(getOutboxToken(IdempotencyService, name))(interceptor, undefined, slot);
    interceptors.set(name, interceptor);
  }
  return interceptor;
}
