import { OutboxInvalidMessageError } from '../errors';
import { emitManyRows, emitRow } from './emit-rows';

describe('emit() expiry options', () => {
  const invalid = (options: object) => {
    try {
      emitRow('order.created', {}, options);
    } catch (error) {
      expect(error).toBeInstanceOf(OutboxInvalidMessageError);
      return (error as Error).message;
    }
    throw new Error(`emitRow accepted ${JSON.stringify(options)}`);
  };

  it('carries expiresIn (ms after the insert) or expiresAt (epoch ms) into the row', () => {
    expect(emitRow('e', {}, { expiresIn: 1000 })).toMatchObject({ expiresIn: 1000 });
    expect(emitRow('e', {}, { expiresIn: 1000 }).expiresAt).toBeUndefined();
    const at = new Date('2030-01-01T00:00:00Z');
    expect(emitRow('e', {}, { expiresAt: at, availableAt: new Date('2029-12-31T00:00:00Z') })).toMatchObject({
      expiresAt: at.getTime(),
    });
    expect(emitRow('e', {}, { expiresIn: 5000, delay: 1000 })).toMatchObject({ expiresIn: 5000, delay: 1000 });
    const plain = emitRow('e', {}, {});
    expect([plain.expiresIn, plain.expiresAt]).toEqual([undefined, undefined]);
  });

  it('refuses an expiresIn that is not a positive number, naming the fix', () => {
    for (const expiresIn of [-1, 0, Number.NaN, Number.POSITIVE_INFINITY, '1000']) {
      expect(invalid({ expiresIn })).toMatch(/option expiresIn must be a number of milliseconds > 0.*Leave it out/);
    }
  });

  it('refuses an expiresAt that is not a valid Date', () => {
    for (const expiresAt of [new Date(Number.NaN), Date.now() + 1000, '2030-01-01']) {
      expect(invalid({ expiresAt })).toMatch(/option expiresAt must be a valid Date. Use expiresIn/);
    }
  });

  it('refuses both options at once', () => {
    expect(invalid({ expiresIn: 1000, expiresAt: new Date() })).toMatch(
      /expiresIn and expiresAt are both given: give one/,
    );
  });

  it('refuses an expiry at or before the message is due', () => {
    expect(invalid({ expiresIn: 1000, delay: 1000 })).toMatch(/expiresIn \(1000 ms\) must be larger than delay.*raise/);
    const availableAt = new Date('2030-01-01T00:00:00Z');
    expect(invalid({ availableAt, expiresAt: new Date(availableAt.getTime() - 1) })).toMatch(
      /expiresAt \(2029-12-31T23:59:59.999Z\) must be later than availableAt \(2030-01-01T00:00:00.000Z\)/,
    );
  });

  it('checks each event of emitMany(), naming it', () => {
    expect(() =>
      emitManyRows(
        [
          { pattern: 'a', payload: 1 },
          { pattern: 'b', payload: 2, options: { expiresIn: -5 } },
        ],
        {},
      ),
    ).toThrow(/^emitMany\(\) event #1: emit\('b'\) option expiresIn must be a number of milliseconds > 0/);
    expect(emitManyRows([{ pattern: 'a', payload: 1, options: { expiresIn: 10 } }], {})[0]).toMatchObject({
      expiresIn: 10,
    });
  });

  it('refuses an event with a field beside pattern, payload and options: an option there would be lost', () => {
    const misplaced = [
      { pattern: 'a', payload: 1 },
      { pattern: 'b', payload: 2, key: 'k1' },
    ] as never;
    expect(() => emitManyRows(misplaced, {})).toThrow(
      'emitMany() event #1 has the unknown field key: an event is { pattern, payload, options? }; key belongs in its ' +
        'options: { pattern, payload, options: { key } }.',
    );
    const typo = [{ pattern: 'a', payload: 1, option: {} }] as never;
    expect(() => emitManyRows(typo, {})).toThrow(/^emitMany\(\) event #0 has the unknown field option: an event is/);
    expect(emitManyRows([{ pattern: 'a', payload: 1, options: { key: 'k1' } }], {})[0]).toMatchObject({ key: 'k1' });
  });
});

describe('emit() cause', () => {
  const cause = { scope: 'user-7', key: 'pay-42' };

  it('records the cause and sends its key as x-outbox-cause, beside the headers given', () => {
    const row = emitRow('e', {}, { headers: { tenant: 'acme' } }, cause);
    expect(row.cause).toEqual(cause);
    expect(JSON.parse(row.headers!)).toEqual({ tenant: 'acme', 'x-outbox-cause': 'pay-42' });
    const many = emitManyRows(
      [
        { pattern: 'a', payload: 1 },
        { pattern: 'b', payload: 2 },
      ],
      {},
      cause,
    );
    expect(many.map((r) => [r.cause, JSON.parse(r.headers!)['x-outbox-cause']])).toEqual([
      [cause, 'pay-42'],
      [cause, 'pay-42'],
    ]);
  });

  it('leaves rows emitted outside an idempotent call without a cause or header', () => {
    const row = emitRow('e', {}, {});
    expect(row.cause).toBeUndefined();
    expect(row.headers).toBeNull();
  });
});
