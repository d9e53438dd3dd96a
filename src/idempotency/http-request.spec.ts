import fc from 'fast-check';
import { parseIdempotencyKey } from './http-request';

/** Serializes a key as an RFC 8941 sf-string (§4.1.6): `"` and `\` escaped. */
const serialize = (key: string) => `"${key.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
const printableAscii = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)) });
const ows = fc.string({ unit: fc.constantFrom(' ', '\t'), maxLength: 3 });

describe('parseIdempotencyKey', () => {
  it('reads a quoted key without its quotes', () => {
    expect(parseIdempotencyKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"')).toEqual({
      ok: true,
      key: '8e03978e-40d5-43e8-bc93-6894a57f9324',
    });
  });

  it('takes a bare key as it is', () => {
    expect(parseIdempotencyKey('8e03978e-40d5')).toEqual({ ok: true, key: '8e03978e-40d5' });
    expect(parseIdempotencyKey('a"b')).toEqual({ ok: true, key: 'a"b' });
  });

  it('unescapes \\" and \\\\ and allows whitespace around the quotes', () => {
    expect(parseIdempotencyKey(' "a\\"b\\\\c" \t')).toEqual({ ok: true, key: 'a"b\\c' });
    expect(parseIdempotencyKey('""')).toEqual({ ok: true, key: '' });
  });

  it.each([
    ['unterminated', '"abc', 'closing double quote'],
    ['a lone backslash at the end', '"abc\\', 'backslash'],
    ['an escape of another character', '"a\\nb"', 'backslash'],
    ['a non-ASCII character', '"clé"', 'printable ASCII'],
    ['a control character', '"a\u0001b"', 'printable ASCII'],
    ['garbage after the closing quote', '"abc"def', 'closing double quote'],
    ['a second string', '"a", "b"', 'closing double quote'],
  ])('rejects %s, saying how to fix it', (_name, raw, hint) => {
    const parsed = parseIdempotencyKey(raw);
    expect(parsed.ok).toBe(false);
    expect(!parsed.ok && parsed.reason).toContain(hint);
  });

  it('round-trips every printable-ASCII key serialized as an sf-string, with any surrounding OWS', () => {
    fc.assert(
      fc.property(printableAscii, ows, ows, (key, before, after) => {
        expect(parseIdempotencyKey(`${before}${serialize(key)}${after}`)).toEqual({ ok: true, key });
      }),
    );
  });

  it('rejects every quoted value with a character outside 0x20–0x7E', () => {
    const outside = fc.oneof(fc.integer({ min: 0, max: 0x1f }), fc.integer({ min: 0x7f, max: 0xffff }));
    fc.assert(
      fc.property(printableAscii, outside, printableAscii, (a, code, b) => {
        const raw = `${serialize(a).slice(0, -1)}${String.fromCharCode(code)}${serialize(b).slice(1)}`;
        expect(parseIdempotencyKey(raw).ok).toBe(false);
      }),
    );
  });

  it('takes every value that does not start with a quote as a bare key, unchanged', () => {
    fc.assert(
      fc.property(
        fc.string().filter((s) => !/^[ \t]*"/.test(s)),
        (raw) => {
          expect(parseIdempotencyKey(raw)).toEqual({ ok: true, key: raw });
        },
      ),
    );
  });
});
