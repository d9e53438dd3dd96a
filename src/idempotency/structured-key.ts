/**
 * Reads an idempotency key as draft-ietf-httpapi-idempotency-key-header writes it: an RFC 8941 Structured Field
 * String (`"8e03978e-…"`, parsed per RFC 8941 §4.2.5, the quotes not part of the key), or today's bare token.
 */

/** A key read from the header: its value, or why the quoted form was malformed (a sentence for the client). */
export type ParsedKey = { ok: true; key: string } | { ok: false; reason: string };

const DQUOTE = '"';
const BACKSLASH = '\\';

/** Whether a character is optional whitespace (SP or HTAB), which may surround a field value. */
function isOws(char: string): boolean {
  return char === ' ' || char === '\t';
}

/**
 * The key a header value carries. A value that starts with `"` (after optional whitespace) is an sf-string: printable
 * ASCII (0x20–0x7E) between double quotes, `\"` and `\\` the only escapes, nothing but whitespace after the closing
 * quote. Any other value is a bare key, taken as it is.
 */
export function parseIdempotencyKey(raw: string): ParsedKey {
  let start = 0;
  while (start < raw.length && isOws(raw[start])) start++;
  if (raw[start] !== DQUOTE) return { ok: true, key: raw };
  let key = '';
  for (let i = start + 1; i < raw.length; i++) {
    const char = raw[i];
    const code = char.charCodeAt(0);
    if (char === BACKSLASH) {
      const escaped = raw[++i];
      if (escaped !== DQUOTE && escaped !== BACKSLASH) return malformed(BAD_ESCAPE);
      key += escaped;
    } else if (char === DQUOTE) {
      return trailingOnlyOws(raw, i + 1) ? { ok: true, key } : malformed(TRAILING);
    } else if (code < 0x20 || code > 0x7e) {
      return malformed(NOT_ASCII);
    } else {
      key += char;
    }
  }
  return malformed(UNTERMINATED);
}

function trailingOnlyOws(raw: string, from: number): boolean {
  for (let i = from; i < raw.length; i++) if (!isOws(raw[i])) return false;
  return true;
}

function malformed(reason: string): ParsedKey {
  return { ok: false, reason };
}

const UNTERMINATED = 'the quoted key has no closing double quote: end it with `"`';
const BAD_ESCAPE = 'a backslash in a quoted key may only escape `"` or `\\`: write `\\"` or `\\\\`, nothing else';
const NOT_ASCII =
  'a quoted key may hold only printable ASCII characters (0x20–0x7E): leave out control and non-ASCII characters';
const TRAILING =
  'nothing but whitespace may follow the closing double quote of a quoted key: remove what comes after it';
