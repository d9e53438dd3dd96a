import { OutboxConfigurationError } from '../errors';
import { resolveOutboxOptions } from '../outbox.options-validation';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from './idempotency.options';
import { resolveIdempotencyDefaults } from './idempotency.options-validation';

describe('idempotency options', () => {
  const resolve = (idempotency: unknown) =>
    resolveOutboxOptions({ publisher: { enabled: false }, idempotency } as any).idempotency;

  it('applies the defaults', () => {
    expect(resolve(undefined)).toEqual(DEFAULT_IDEMPOTENCY_OPTIONS);
    expect(DEFAULT_IDEMPOTENCY_OPTIONS).toMatchObject({
      header: 'Idempotency-Key',
      required: true,
      ttl: 86_400_000,
      retryAfter: 1,
      manualAck: undefined, // derived from the RabbitMQ consumer's noAck (consumer-ack-mode.ts)
      connectionTimeout: 5000,
      lockTimeout: 2000,
      statementTimeout: 5000,
    });
  });

  it('takes valid overrides and lower-cases replayed header names', () => {
    expect(
      resolve({ header: 'X-Request-Id', ttl: 3_600_000, required: false, replayHeaders: ['Location'] }),
    ).toMatchObject({
      header: 'X-Request-Id',
      ttl: 3_600_000,
      required: false,
      replayHeaders: ['location'],
    });
  });

  it.each([
    [{ ttl: 5 }, /idempotency\.ttl.*at least 1000/],
    [{ ttl: '1h' }, /idempotency\.ttl/],
    [{ header: 'bad header' }, /idempotency\.header.*HTTP header name/],
    [{ required: 'yes' }, /idempotency\.required.*boolean/],
    [{ retryAfter: -1 }, /idempotency\.retryAfter/],
    [{ replayHeaders: 'location' }, /idempotency\.replayHeaders/],
    [{ manualAck: 1 }, /idempotency\.manualAck/],
    [{ maxKeyLength: 0 }, /idempotency\.maxKeyLength.*from 1 to 255/],
    [{ connectionTimeout: 0 }, /idempotency\.connectionTimeout.*milliseconds/],
    [{ lockTimeout: 1.5 }, /idempotency\.lockTimeout.*milliseconds/],
    [{ statementTimeout: '5s' }, /idempotency\.statementTimeout.*milliseconds/],
    [{ lockTimeout: 5000, statementTimeout: 5000 }, /idempotency\.statementTimeout.*greater than lockTimeout/],
    [{ maxKeyLength: 256 }, /idempotency\.maxKeyLength.*from 1 to 255.*size of the key column/],
    [{ maxKeyLength: 10.5 }, /idempotency\.maxKeyLength/],
    [{ replayErrors: 'yes' }, /idempotency\.replayErrors.*boolean or a function/],
    [{ tll: 1000 }, /idempotency\.tll.*not a known option.*ttl/],
    ['24h', /idempotency.*must be an object/],
  ])('rejects %j with OutboxConfigurationError naming the option', (input, message) => {
    expect(() => resolve(input)).toThrow(OutboxConfigurationError);
    expect(() => resolve(input)).toThrow(message);
  });

  it('defaults replayErrors to true (the default policy) and takes false or a function', () => {
    expect(DEFAULT_IDEMPOTENCY_OPTIONS.replayErrors).toBe(true);
    const policy = () => true;
    expect(resolve({ replayErrors: false }).replayErrors).toBe(false);
    expect(resolve({ replayErrors: policy }).replayErrors).toBe(policy);
  });

  it('defaults maxKeyLength to 255 and takes 1 to 255', () => {
    expect(DEFAULT_IDEMPOTENCY_OPTIONS.maxKeyLength).toBe(255);
    expect(resolve({ maxKeyLength: 1 }).maxKeyLength).toBe(1);
    expect(resolve({ maxKeyLength: 64 }).maxKeyLength).toBe(64);
  });

  it('layers decorator options over module defaults', () => {
    const module = resolveIdempotencyDefaults({ ttl: 60_000 });
    expect(resolveIdempotencyDefaults({ retryAfter: 3 }, module)).toMatchObject({
      ttl: 60_000,
      retryAfter: 3,
      header: 'Idempotency-Key',
    });
  });
});
