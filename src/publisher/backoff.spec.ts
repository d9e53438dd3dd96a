import { DEFAULT_RETRY_OPTIONS } from '../outbox.options';
import { retryDelay } from './backoff';

describe('retryDelay', () => {
  const retry = { ...DEFAULT_RETRY_OPTIONS, jitter: 0 };

  it('grows exponentially from initialDelay and stops at maxDelay', () => {
    expect([1, 2, 3, 4].map((a) => retryDelay(a, retry))).toEqual([1000, 2000, 4000, 8000]);
    expect(retryDelay(30, retry)).toBe(retry.maxDelay);
  });

  it('spreads the delay by ± jitter', () => {
    const jittered = { ...retry, jitter: 0.5 };
    expect(retryDelay(1, jittered, () => 0)).toBe(500);
    expect(retryDelay(1, jittered, () => 1)).toBe(1500);
    expect(retryDelay(1, jittered, () => 0.5)).toBe(1000);
  });
});
