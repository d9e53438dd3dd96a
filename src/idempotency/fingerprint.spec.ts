import fc from 'fast-check';
import { fingerprintOf, JsonNestingTooDeepError, MAX_JSON_DEPTH, stableJson } from './fingerprint';

describe('stableJson / fingerprintOf', () => {
  it('does not depend on the key order of objects, at any depth', () => {
    expect(stableJson({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: null } })).toBe(
      stableJson({ a: { c: null, d: [1, { x: 1, y: 2 }] }, b: 1 }),
    );
    expect(fingerprintOf('POST', { amount: 25, currency: 'EUR' })).toBe(
      fingerprintOf('POST', { currency: 'EUR', amount: 25 }),
    );
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

  it('writes the same text for a value however deep it sits (the shallow pass and the careful one agree)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer({ min: 0, max: 80 }), (value, depth) => {
        let wrapped: unknown = value;
        for (let i = 0; i < depth; i++) wrapped = i % 2 ? [wrapped] : { k: wrapped };
        const text = stableJson(wrapped);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(wrapped) ?? 'null'));
        expect(text).toContain(stableJson(value));
      }),
    );
    expect(stableJson([, 1])).toBe('[null,1]');
  });

  it('cuts cycles instead of overflowing the stack', () => {
    const a: Record<string, unknown> = { x: 1 };
    a.self = a;
    expect(stableJson(a)).toBe('{"self":"[Circular]","x":1}');
  });

  it('refuses a value nested deeper than the limit with JsonNestingTooDeepError, never a stack overflow', () => {
    const nested = (depth: number, open: string, inner: string, close: string) =>
      JSON.parse(open.repeat(depth) + inner + close.repeat(depth));
    // ~4 KB of JSON that used to overflow the stack; and far deeper ones.
    for (const depth of [MAX_JSON_DEPTH + 1, 2_040, 20_000, 200_000]) {
      expect(() => fingerprintOf('POST', '/orders', {}, nested(depth, '[', '', ']'))).toThrow(JsonNestingTooDeepError);
      expect(() => stableJson(nested(depth, '{"a":', '1', '}'))).toThrow(new JsonNestingTooDeepError(MAX_JSON_DEPTH));
    }
    expect(() => fingerprintOf(nested(2_040, '[', '', ']'))).toThrow(`more than ${MAX_JSON_DEPTH} levels`);
  });

  it('accepts a value nested exactly as deep as the limit (in a fingerprint too)', () => {
    const deepest = JSON.parse('['.repeat(MAX_JSON_DEPTH) + ']'.repeat(MAX_JSON_DEPTH));
    expect(stableJson(deepest)).toBe(JSON.stringify(deepest));
    expect(fingerprintOf('POST', '/orders', {}, deepest)).toMatch(/^[0-9a-f]{64}$/);
    expect(() => stableJson([[[1]]], 2)).toThrow(new JsonNestingTooDeepError(2));
    expect(stableJson([[1]], 2)).toBe('[[1]]');
  });
});
