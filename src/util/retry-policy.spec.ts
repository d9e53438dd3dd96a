import { OutboxConfigurationError, OutboxHandlerFailedError, OutboxNonRetryableError } from '../errors';
import { resolveOutboxOptions } from '../outbox.options-validation';
import { bySpecificity, globMatches, isFinalFailure, longestDelay, policyFor } from './retry-policy';
import type { OutboxRetryMessage } from '../retry.options';

const message = (): OutboxRetryMessage => ({
  messageId: 'm1',
  pattern: 'audit.login',
  key: null,
  destination: '',
  payload: {},
  headers: {},
});

describe('retry pattern globs', () => {
  it('matches * within a segment and ** across segments', () => {
    expect(globMatches('audit.*', 'audit.login')).toBe(true);
    expect(globMatches('audit.*', 'audit.user.login')).toBe(false);
    expect(globMatches('audit.**', 'audit.user.login')).toBe(true);
    expect(globMatches('audit.*', 'audit')).toBe(false);
    expect(globMatches('audit/*', 'audit/a/b')).toBe(false);
    expect(globMatches('*.created', 'orders.created')).toBe(true);
    expect(globMatches('orders.created', 'orders.created')).toBe(true);
    expect(globMatches('orders.created', 'orders_created')).toBe(false); // '.' is literal, not any character
    expect(globMatches('a+b(c)', 'a+b(c)')).toBe(true);
  });

  it('orders the most specific first, declared order on ties', () => {
    const sorted = bySpecificity([
      { glob: '**' },
      { glob: 'audit.*' },
      { glob: 'audit.login' },
      { glob: 'audit.**' },
      { glob: '*.login' },
    ]).map((e) => e.glob);
    expect(sorted).toEqual(['audit.login', 'audit.*', '*.login', 'audit.**', '**']);
  });
});

describe('retry policy resolution', () => {
  const resolve = (retry: unknown) => resolveOutboxOptions({ client: 'B', retry } as never).retry;

  it('gives a pattern the most specific matching policy, each refining the defaults', () => {
    const retry = resolve({
      maxAttempts: 7,
      initialDelay: 50,
      patterns: { 'audit.*': { maxAttempts: 2 }, 'audit.login': { maxAttempts: 3 }, '**': { maxAttempts: 9 } },
    });
    expect(policyFor(retry, 'audit.login')).toMatchObject({ maxAttempts: 3, initialDelay: 50 });
    expect(policyFor(retry, 'audit.logout')).toMatchObject({ maxAttempts: 2, initialDelay: 50, factor: 2 });
    expect(policyFor(retry, 'orders.created').maxAttempts).toBe(9);
    expect(policyFor(resolve({ maxAttempts: 7 }), 'orders.created').maxAttempts).toBe(7);
  });

  it('takes the longest maxDelay of every policy for a broker deduplication window', () => {
    const retry = resolve({ maxDelay: 1000, patterns: { 'slow.*': { maxDelay: 60_000 } } });
    expect(longestDelay(retry)).toBe(60_000);
  });

  it('refuses bad patterns and policies with the option named', () => {
    expect(() => resolve({ patterns: [] })).toThrow(/`retry.patterns` must be an object of glob → policy/);
    expect(() => resolve({ patterns: { '': {} } })).toThrow(OutboxConfigurationError);
    expect(() => resolve({ patterns: { 'a.*': { maxAttempts: 0 } } })).toThrow(
      /`retry.patterns\["a.\*"\].maxAttempts` must be at least 1/,
    );
    expect(() => resolve({ patterns: { 'a.*': { historyLimit: 1 } } })).toThrow(/is not a known option/);
    expect(() => resolve({ retryIf: 'no' })).toThrow(/`retry.retryIf` must be a function/);
  });

  it('lets a consumer retry add its patterns to the module-wide ones over its own defaults', () => {
    const options = resolveOutboxOptions({
      client: 'B',
      idempotency: { retry: { maxAttempts: 4, patterns: { 'a.*': { initialDelay: 5 } } } },
    } as never);
    const base = options.idempotency.retry;
    if (!base) throw new Error('expected a consumer retry');
    expect(policyFor(base, 'a.x')).toMatchObject({ maxAttempts: 4, initialDelay: 5 });
  });
});

describe('isFinalFailure', () => {
  const policy = { maxAttempts: 3, initialDelay: 1, factor: 2, maxDelay: 10, jitter: 0 };

  it('ends at maxAttempts and on OutboxNonRetryableError, raw or thrown by a handler', () => {
    expect(isFinalFailure(policy, new Error('x'), 2, message)).toBe(false);
    expect(isFinalFailure(policy, new Error('x'), 3, message)).toBe(true);
    expect(isFinalFailure(policy, new OutboxNonRetryableError('x'), 1, message)).toBe(true);
  });

  it('asks retryIf with the handler’s own error, the attempt and the message; a throw retries', () => {
    const seen: unknown[] = [];
    const cause = new TypeError('bad input');
    const retryIf = (error: unknown, attempt: number, m: OutboxRetryMessage) => {
      seen.push([error, attempt, m.pattern]);
      return !(error instanceof TypeError);
    };
    const wrapped = new OutboxHandlerFailedError('handler failed', cause);
    expect(isFinalFailure({ ...policy, retryIf }, wrapped, 1, message)).toBe(true);
    expect(seen).toEqual([[cause, 1, 'audit.login']]);
    expect(isFinalFailure({ ...policy, retryIf }, new Error('x'), 1, message)).toBe(false);
    const throwing = () => {
      throw new Error('buggy');
    };
    expect(isFinalFailure({ ...policy, retryIf: throwing }, new Error('x'), 1, message)).toBe(false);
  });
});
