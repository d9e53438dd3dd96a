import { isSecretFieldName, REDACTED, redactSecrets } from '../util/redact-secrets';

/** One value that differs between two JSON values: where (a JSON Pointer), and each side as redacted JSON text. */
export interface JsonChange {
  path: string;
  /** JSON text of the value before, redacted; null when it was absent. */
  before: string | null;
  /** JSON text of the value after, redacted; null when it is absent. */
  after: string | null;
}

/** Longest JSON text kept for one side of a change (longer texts are cut and end with `…`). */
const MAX_VALUE_TEXT = 1000;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A JSON Pointer segment (RFC 6901): `~` as `~0`, `/` as `~1`. */
const segment = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * The values that differ between `before` and `after` (plain JSON: objects, arrays, strings, numbers, booleans,
 * null), object by key and array by index, as at most `limit` changes (`truncated` beyond). Each side is shown as
 * JSON text redacted of credentials: `***` under a secret-named key anywhere on the path (`password`, `apiKey`, …),
 * else the text with URL user-info and secret fields inside it redacted.
 */
export function jsonChanges(
  before: unknown,
  after: unknown,
  limit: number,
): { changes: JsonChange[]; truncated: boolean } {
  const changes: JsonChange[] = [];
  let truncated = false;
  const walk = (a: unknown, b: unknown, path: string, secret: boolean): void => {
    if (truncated || sameJson(a, b)) return;
    if (isObject(a) && isObject(b)) {
      const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
      for (const key of keys) walk(a[key], b[key], `${path}/${segment(key)}`, secret || isSecretFieldName(key));
      return;
    }
    if (Array.isArray(a) && Array.isArray(b)) {
      for (let i = 0; i < Math.max(a.length, b.length); i++) walk(a[i], b[i], `${path}/${i}`, secret);
      return;
    }
    if (changes.length === limit) {
      truncated = true;
      return;
    }
    changes.push({ path, before: shown(a, secret), after: shown(b, secret) });
  };
  walk(before, after, '', false);
  return { changes, truncated };
}

function shown(value: unknown, secret: boolean): string | null {
  if (value === undefined) return null;
  if (secret) return JSON.stringify(REDACTED);
  const text = redactSecrets(JSON.stringify(value));
  return text.length > MAX_VALUE_TEXT ? `${text.slice(0, MAX_VALUE_TEXT - 1)}…` : text;
}

/** Deep equality of two JSON values (object keys in any order). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((v, i) => sameJson(v, b[i]));
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => k in b && sameJson(a[k], b[k]));
  }
  return false;
}
