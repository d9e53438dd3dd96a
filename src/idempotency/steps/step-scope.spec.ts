import { IdempotentStepResultError, parseStepResult, serializeStepResult, stepKeyOf } from './step-scope';

const roundTrip = (value: unknown) => parseStepResult(serializeStepResult('s', value));

describe('a step result', () => {
  it('keeps plain JSON data as it is', () => {
    const value = { id: 'ch_1', amount: 25, paid: true, refunds: [], meta: { note: null, tags: ['a', 'b'] } };
    expect(roundTrip(value)).toEqual(value);
    expect(roundTrip('text')).toBe('text');
    expect(roundTrip(0)).toBe(0);
    expect(roundTrip(null)).toBeNull();
  });

  it('turns what JSON cannot hold into what JSON.stringify makes of it', () => {
    class Money {
      constructor(readonly cents: number) {}
      get euros(): number {
        return this.cents / 100;
      }
    }
    expect(roundTrip(new Date(Date.UTC(2026, 0, 2)))).toBe('2026-01-02T00:00:00.000Z');
    expect(roundTrip(new Money(250))).toEqual({ cents: 250 });
    expect(roundTrip({ a: undefined, b: NaN, c: Infinity, d: [undefined] })).toEqual({ b: null, c: null, d: [null] });
    expect(roundTrip(undefined)).toBeUndefined();
    expect(serializeStepResult('s', undefined)).toBeNull();
    expect(roundTrip(() => 1)).toBeUndefined();
  });

  it('refuses a BigInt or a cycle with IdempotentStepResultError naming the step', () => {
    expect(() => serializeStepResult('charge', { amount: 1n })).toThrow(IdempotentStepResultError);
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(() => serializeStepResult('charge', cycle)).toThrow(/step 'charge' ran/);
  });
});

describe('a step key', () => {
  it('is 64 hex characters, the same for the same call and step, different when anything differs', () => {
    const key = stepKeyOf('tenant-1', 'key-1', 'f'.repeat(64), 'charge');
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(stepKeyOf('tenant-1', 'key-1', 'f'.repeat(64), 'charge')).toBe(key);
    expect(stepKeyOf('tenant-2', 'key-1', 'f'.repeat(64), 'charge')).not.toBe(key);
    expect(stepKeyOf('tenant-1', 'key-2', 'f'.repeat(64), 'charge')).not.toBe(key);
    expect(stepKeyOf('tenant-1', 'key-1', 'e'.repeat(64), 'charge')).not.toBe(key);
    expect(stepKeyOf('tenant-1', 'key-1', 'f'.repeat(64), 'fee')).not.toBe(key);
    // The separator keeps (scope, key) pairs apart.
    expect(stepKeyOf('a', 'bc', 'f', 's')).not.toBe(stepKeyOf('ab', 'c', 'f', 's'));
  });
});
