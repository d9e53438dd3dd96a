import fc from 'fast-check';
import { fingerprintOf } from './fingerprint';
import { stableJson } from './stable-json';

describe('stableJson / fingerprintOf', () => {
  it('does not depend on the key order of objects, at any depth', () => {
    expect(stableJson({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: null } })).toBe(stableJson({ a: { c: null, d: [1, { x: 1, y: 2 }] }, b: 1 }));
    expect(fingerprintOf('POST', { amount: 25, currency: 'EUR' })).toBe(fingerprintOf('POST', { currency: 'EUR', amount: 25 }));
  });

  it('parses back to the same value as JSON.stringify for any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(JSON.parse(stableJson(value))).toEqual(JSON.parse(JSON.stringify(value) ?? 'null'));
      }),
    );
  });

  it('gives the same text for any permutation of an object’s keys', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (object) => {
        const reversed = Object.fromEntries(Object.entries(object).reverse());
        expect(stableJson(reversed)).toBe(stableJson(object));
      }),
    );
  });

  it('tells different values apart', () => {
    expect(fingerprintOf({ amount: 25 })).not.toBe(fingerprintOf({ amount: 26 }));
    expect(fingerprintOf('POST', '/a', {})).not.toBe(fingerprintOf('POST', '/b', {}));
    expect(stableJson([1, undefined, () => 1])).toBe('[1,null,null]');
    expect(stableJson({ a: undefined, d: new Date(0), n: 10n })).toBe('{"d":"1970-01-01T00:00:00.000Z","n":"10"}');
  });

  it('cuts cycles instead of overflowing the stack', () => {
    const a: Record<string, unknown> = { x: 1 };
    a.self = a;
    expect(stableJson(a)).toBe('{"self":"[Circular]","x":1}');
  });
});
