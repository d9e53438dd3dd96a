import { hostname } from 'node:os';
import { OutboxConfigurationError } from './errors';
import { DEFAULT_PUBLISHER_OPTIONS, DEFAULT_RETRY_OPTIONS } from './outbox.options';
import { resolveOutboxOptions } from './outbox.options-validation';

describe('resolveOutboxOptions', () => {
  it('applies every default', () => {
    const resolved = resolveOutboxOptions({ client: 'BROKER' });
    expect(resolved.publisher).toEqual(DEFAULT_PUBLISHER_OPTIONS);
    expect(resolved.retry).toEqual(DEFAULT_RETRY_OPTIONS);
    expect(resolved.transport).toBe('auto');
    expect(resolved.client).toBe('BROKER');
    expect(resolved.schemaCheck).toBe(true);
  });

  it('keeps 10 attempts of history and names the publisher hostname:pid by default; keeps given values', () => {
    const defaults = resolveOutboxOptions({ client: 'B' });
    expect(defaults.retry.historyLimit).toBe(10);
    expect(defaults.publisher.instanceId).toBe(`${hostname()}:${process.pid}`);
    const given = resolveOutboxOptions({ client: 'B', retry: { historyLimit: 0 }, publisher: { instanceId: 'pod-7' } });
    expect(given.retry.historyLimit).toBe(0);
    expect(given.publisher.instanceId).toBe('pod-7');
  });

  it("makes expired messages dead by default; keeps onExpired: 'drop'", () => {
    expect(resolveOutboxOptions({ client: 'B' }).publisher.onExpired).toBe('dead');
    expect(resolveOutboxOptions({ client: 'B', publisher: { onExpired: 'drop' } }).publisher.onExpired).toBe('drop');
  });

  it.each([
    [
      'a negative history limit',
      { retry: { historyLimit: -1 } },
      /`retry\.historyLimit` must be between 0 and 1000, got -1/,
    ],
    [
      'a history limit above 1000',
      { retry: { historyLimit: 1001 } },
      /`retry\.historyLimit` must be between 0 and 1000/,
    ],
    ['a fractional history limit', { retry: { historyLimit: 2.5 } }, /`retry\.historyLimit` must be an integer/],
    ['an empty instance id', { publisher: { instanceId: '' } }, /`publisher\.instanceId` must be a non-empty string/],
    ['a 256-character instance id', { publisher: { instanceId: 'x'.repeat(256) } }, /at most 255 characters/],
    ['a numeric instance id', { publisher: { instanceId: 7 } }, /`publisher\.instanceId` must be a non-empty string/],
    ['an unknown onExpired', { publisher: { onExpired: 'delete' } }, /`publisher\.onExpired` must be 'dead' or 'drop'/],
  ])('refuses %s', (_what, options, message) => {
    expect(() => resolveOutboxOptions({ client: 'B', ...(options as object) })).toThrow(OutboxConfigurationError);
    expect(() => resolveOutboxOptions({ client: 'B', ...(options as object) })).toThrow(message);
  });

  it('leaves editing dead letters off by default; keeps deadLetters.allowEdit: true', () => {
    expect(resolveOutboxOptions({ client: 'B' }).deadLetters).toEqual({ allowEdit: false });
    expect(resolveOutboxOptions({ client: 'B', deadLetters: { allowEdit: true } }).deadLetters).toEqual({
      allowEdit: true,
    });
    expect(() => resolveOutboxOptions({ client: 'B', deadLetters: { allowEdit: 'yes' } as never })).toThrow(
      /deadLetters\.allowEdit/,
    );
    expect(() => resolveOutboxOptions({ client: 'B', deadLetters: { alowEdit: true } as never })).toThrow(
      /deadLetters\.alowEdit/,
    );
  });

  it('keeps schemaCheck: false', () => {
    expect(resolveOutboxOptions({ client: 'B', schemaCheck: false }).schemaCheck).toBe(false);
  });

  it('keeps given values and accepts symbol and class tokens', () => {
    class Broker {}
    const token = Symbol('broker');
    expect(resolveOutboxOptions({ client: token, publisher: { batchSize: 50 } }).publisher.batchSize).toBe(50);
    expect(resolveOutboxOptions({ client: Broker, transport: 'rmq' }).client).toBe(Broker);
  });

  it('leaves a missing client to the startup check (in-process handlers may be the only destination)', () => {
    expect(resolveOutboxOptions({}).client).toBeUndefined();
  });

  it('accepts a route of several clients', () => {
    const select = () => 'A';
    expect(resolveOutboxOptions({ route: { clients: ['A', 'B'], select } }).route).toEqual({
      clients: ['A', 'B'],
      select,
    });
  });

  it('does not need a client when the publisher is disabled', () => {
    expect(resolveOutboxOptions({ publisher: { enabled: false } }).client).toBeUndefined();
  });

  it('raises the default lease when a long publishTimeout would outlive it', () => {
    const { publisher } = resolveOutboxOptions({ client: 'B', publisher: { publishTimeout: 60_000 } });
    expect(publisher.leaseDuration).toBeGreaterThanOrEqual(61_000);
  });

  it.each([
    ['neither set', {}, 10_000, 30_000],
    ['a short lease alone', { leaseDuration: 3_000 }, 1_000, 3_000],
    ['a lease of 15 s alone', { leaseDuration: 15_000 }, 5_000, 15_000],
    ['a long lease alone (never above the default)', { leaseDuration: 120_000 }, 10_000, 120_000],
    ['both set (kept as given)', { leaseDuration: 3_000, publishTimeout: 2_000 }, 2_000, 3_000],
  ])('derives publishTimeout from the lease when it is not set: %s', (_name, given, timeout, lease) => {
    const { publisher } = resolveOutboxOptions({ client: 'B', publisher: given });
    expect(publisher).toMatchObject({ publishTimeout: timeout, leaseDuration: lease });
  });

  it.each([
    [
      'route with client',
      { client: 'B', route: { clients: ['B'], select: (): string => 'B' } },
      /`route` cannot be given together with `client`/,
    ],
    [
      'an empty route',
      { route: { clients: [], select: (): string => 'B' } },
      /`route\.clients` must be a non-empty array/,
    ],
    ['a route without select', { route: { clients: ['A'] } }, /`route\.select` must be a function/],
    [
      'a route token twice',
      { route: { clients: ['A', 'A'], select: (): string => 'A' } },
      /`route\.clients` lists a token twice/,
    ],
    ['an empty client token', { client: '' }, /`client` must be an injection token/],
    [
      'a batch size of 0',
      { client: 'B', publisher: { batchSize: 0 } },
      /`publisher\.batchSize` must be between 1 and 10000, got 0/,
    ],
    [
      'a fractional batch size',
      { client: 'B', publisher: { batchSize: 1.5 } },
      /`publisher\.batchSize` must be an integer/,
    ],
    [
      'a string "false" for a boolean',
      { client: 'B', publisher: { enabled: 'false' } },
      /`publisher\.enabled` must be a boolean, got the string "false".*not a string/,
    ],
    [
      'a string number',
      { client: 'B', publisher: { pollingInterval: '1000' } },
      /`publisher\.pollingInterval` must be a finite number.*Number\(\)/,
    ],
    ['NaN', { client: 'B', publisher: { publishTimeout: NaN } }, /`publisher\.publishTimeout` must be a finite number/],
    [
      'a lease shorter than the publish timeout',
      { client: 'B', publisher: { publishTimeout: 5000, leaseDuration: 5500 } },
      /`publisher\.leaseDuration` .* must exceed publisher\.publishTimeout/,
    ],
    [
      'a lease too short for the publish timeout derived from it',
      { client: 'B', publisher: { leaseDuration: 1200 } },
      /`publisher\.leaseDuration` \(1200 ms\) must exceed publisher\.publishTimeout \(400 ms, a third of leaseDuration.*at least 1500 ms/,
    ],
    ['an unknown option', { client: 'B', pollingInterval: 5 }, /`pollingInterval` is not a known option.*publisher/],
    [
      'an unknown publisher option',
      { client: 'B', publisher: { batchsize: 5 } },
      /`publisher\.batchsize` is not a known option.*batchSize/,
    ],
    ['an unknown transport', { client: 'B', transport: 'amqp' }, /`transport` must be one of auto, rmq/],
    ['publisher not an object', { client: 'B', publisher: true }, /`publisher` must be an object/],
    ['maxAttempts 0', { client: 'B', retry: { maxAttempts: 0 } }, /`retry\.maxAttempts` must be at least 1/],
    ['jitter above 1', { client: 'B', retry: { jitter: 2 } }, /`retry\.jitter` must be between 0 and 1/],
    ['a string schemaCheck', { client: 'B', schemaCheck: 'false' }, /`schemaCheck` must be a boolean, got the str/],
    [
      'maxDelay below initialDelay',
      { client: 'B', retry: { initialDelay: 5000, maxDelay: 100 } },
      /`retry\.maxDelay`.*below retry\.initialDelay/,
    ],
  ])('rejects %s with OutboxConfigurationError naming the option and the fix', (_label, options, message) => {
    expect(() => resolveOutboxOptions(options as never)).toThrow(OutboxConfigurationError);
    expect(() => resolveOutboxOptions(options as never)).toThrow(message);
  });
});
