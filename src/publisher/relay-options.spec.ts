import { OutboxConfigurationError } from '../errors';
import { DEFAULT_CLEANUP_OPTIONS } from '../outbox.options';
import { resolveOutboxOptions } from '../outbox.options-validation';
import { keyBucket, KEY_LOCK_BUCKETS } from '../dialects/mysql/mysql.dialect';

describe('relay options (publisher.notify, publisher.maxBatchesInFlight, cleanup.*)', () => {
  const base = { client: 'BROKER' };

  it('applies the documented defaults', () => {
    const resolved = resolveOutboxOptions(base);
    expect(resolved.publisher).toMatchObject({ notify: true, maxBatchesInFlight: 4 });
    expect(resolved.cleanup).toEqual({
      enabled: true,
      deleteOnPublish: false,
      retention: 86_400_000,
      interval: 60_000,
      batchSize: 1000,
    });
    expect(resolved.cleanup).toEqual(DEFAULT_CLEANUP_OPTIONS);
  });

  it.each([
    [{ publisher: { notify: 'false' } }, /publisher\.notify.*must be a boolean/],
    [{ publisher: { maxBatchesInFlight: 0 } }, /publisher\.maxBatchesInFlight.*between 1 and 64/],
    [{ cleanup: { retention: -1 } }, /cleanup\.retention.*at least 0/],
    [{ cleanup: { batchSize: 1.5 } }, /cleanup\.batchSize.*integer/],
    [{ cleanup: { deleteOnPublish: 1 } }, /cleanup\.deleteOnPublish.*boolean/],
    [{ cleanup: { retain: 5 } }, /cleanup\.retain.*not a known option.*retention/],
    [{ cleanup: 'daily' }, /cleanup.*must be an object/],
  ])('rejects %j with an OutboxConfigurationError that names the option', (options, message) => {
    expect(() => resolveOutboxOptions({ ...base, ...(options as object) })).toThrow(OutboxConfigurationError);
    expect(() => resolveOutboxOptions({ ...base, ...(options as object) })).toThrow(message);
  });
});

describe('MySQL key-lock buckets', () => {
  it('map a key to a stable bucket in range', () => {
    expect(keyBucket('order-1')).toBe(keyBucket('order-1'));
    const buckets = new Set(Array.from({ length: 2000 }, (_, i) => keyBucket(`order-${i}`)));
    expect([...buckets].every((b) => Number.isInteger(b) && b >= 0 && b < KEY_LOCK_BUCKETS)).toBe(true);
    expect(buckets.size).toBeGreaterThan(1500); // spread, few collisions
  });
});
