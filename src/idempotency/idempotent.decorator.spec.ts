import { SELF_DECLARED_DEPS_METADATA } from '@nestjs/common/constants';
import { Reflector } from '@nestjs/core';
import { getOutboxToken } from '../outbox.constants';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import { IdempotencyService } from './idempotency.service';
import { idempotencyInterceptorFor } from './idempotent.decorator';

describe('idempotencyInterceptorFor', () => {
  it('is the interceptor itself for the default DataSource', () => {
    expect(idempotencyInterceptorFor(undefined)).toBe(IdempotencyInterceptor);
    expect(idempotencyInterceptorFor('default')).toBe(IdempotencyInterceptor);
  });

  it("is one subclass per name, injected with that outbox's IdempotencyService and nothing else changed", () => {
    const billing = idempotencyInterceptorFor('billing');
    expect(idempotencyInterceptorFor('billing')).toBe(billing);
    expect(idempotencyInterceptorFor('reporting')).not.toBe(billing);
    expect(billing.prototype).toBeInstanceOf(IdempotencyInterceptor);
    const paramTypes: unknown[] = Reflect.getMetadata('design:paramtypes', billing);
    const slot = paramTypes.indexOf(IdempotencyService);
    expect(slot).toBeGreaterThanOrEqual(0);
    expect(paramTypes).toContain(Reflector);
    expect(Reflect.getMetadata(SELF_DECLARED_DEPS_METADATA, billing)).toEqual([
      { index: slot, param: getOutboxToken(IdempotencyService, 'billing') },
    ]);
    // The base class is untouched.
    expect(Reflect.getMetadata(SELF_DECLARED_DEPS_METADATA, IdempotencyInterceptor) ?? []).toEqual([]);
  });
});
