import { Injectable, type Type } from '@nestjs/common';
import { getOutboxToken, isDefaultDataSource } from '../outbox.constants';
import { withInjectedTokens } from '../util/named-providers';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import { IdempotencyService } from './idempotency.service';

/** The interceptor's subclass per DataSource name. */
const interceptors = new Map<string, Type<IdempotencyInterceptor>>();

/**
 * The interceptor of `@Idempotent({ dataSource })`: `IdempotencyInterceptor` itself for the default DataSource, else a
 * subclass (one per name) that is given the named outbox's `IdempotencyService` (`getOutboxToken(IdempotencyService,
 * name)`) in place of the default one. Everything else is inherited.
 */
export function idempotencyInterceptorFor(dataSource: string | undefined): Type<IdempotencyInterceptor> {
  if (isDefaultDataSource(dataSource)) return IdempotencyInterceptor;
  const name = dataSource!;
  let interceptor = interceptors.get(name);
  if (!interceptor) {
    // The subclass inherits the constructor and its parameter types; only the IdempotencyService slot is redirected.
    const tokens = new Map([[IdempotencyService, getOutboxToken(IdempotencyService, name)]]);
    interceptor = withInjectedTokens(IdempotencyInterceptor, tokens, `IdempotencyInterceptor(${name})`);
    Injectable()(interceptor);
    interceptors.set(name, interceptor);
  }
  return interceptor;
}
