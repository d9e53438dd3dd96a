import { OutboxConfigurationError } from '../errors';
import { resolveOutboxOptions } from '../outbox.options-validation';
import { resolveIdempotencyDefaults } from './idempotency.options-validation';

describe('consumer retry options (idempotency.retry, @Idempotent({ retry }))', () => {
  const resolve = (retry: unknown) =>
    resolveOutboxOptions({ publisher: { enabled: false }, idempotency: { retry } } as any).idempotency.retry;
  const defaults = { maxAttempts: 10, initialDelay: 1000, factor: 2, maxDelay: 300_000, jitter: 0.2 };

  it('is off by default; true takes the module retry defaults (without historyLimit); an object refines them', () => {
    expect(resolve(undefined)).toBe(false);
    expect(resolve(false)).toBe(false);
    expect(resolve(true)).toEqual(defaults);
    expect(resolve({ maxAttempts: 3, jitter: 0 })).toEqual({ ...defaults, maxAttempts: 3, jitter: 0 });
  });

  it('a decorator refines the module-wide default, or turns it off', () => {
    const base = resolveIdempotencyDefaults({ retry: { maxAttempts: 4, initialDelay: 50 } });
    expect(resolveIdempotencyDefaults({ retry: { factor: 3 } }, base).retry).toEqual({
      ...defaults,
      maxAttempts: 4,
      initialDelay: 50,
      factor: 3,
    });
    expect(resolveIdempotencyDefaults({ retry: false }, base).retry).toBe(false);
    expect(resolveIdempotencyDefaults({}, base).retry).toBe(base.retry);
  });

  it('refuses what the module retry refuses, naming the option and the fix', () => {
    expect(() => resolve({ maxAttempts: 0 })).toThrow(/`idempotency\.retry\.maxAttempts` must be at least 1/);
    expect(() => resolve({ historyLimit: 5 })).toThrow(/`idempotency\.retry\.historyLimit` is not a known option/);
    expect(() => resolve({ initialDelay: 500, maxDelay: 100 })).toThrow(/maxDelay` \(100\) is below/);
    expect(() => resolve('often')).toThrow(OutboxConfigurationError);
    expect(() => resolve({ jitter: '0.5' })).toThrow(/must be a finite number, got the string "0.5"/);
  });
});
