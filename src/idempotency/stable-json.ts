import { OutboxError } from '../errors';

/** Deepest nesting of arrays and objects `stableJson` accepts by default (a request body nested deeper is refused). */
export const MAX_JSON_DEPTH = 1000;

/** A value is nested deeper than `stableJson` accepts (its fingerprint is not computed; the request gets a 400). */
export class JsonNestingTooDeepError extends OutboxError {
  constructor(readonly maxDepth: number) {
    super(`The value is nested more than ${maxDepth} levels deep (arrays and objects); send a flatter value.`);
  }
}

/**
 * JSON text of `value` with object keys sorted at every depth, so two bodies that differ only in key order give the
 * same text (and the same fingerprint). Follows `JSON.stringify` otherwise: `toJSON()` is honoured (Dates), and
 * `undefined`, functions and symbols are dropped from objects and become `null` in arrays. BigInt becomes its
 * decimal string (JSON.stringify would throw). Cycles are cut and marked, never followed. A value nested deeper than
 * `maxDepth` arrays and objects throws `JsonNestingTooDeepError` (instead of overflowing the stack).
 */
export function stableJson(value: unknown, maxDepth = MAX_JSON_DEPTH): string {
  return write(value, new Set(), maxDepth) ?? 'null';
}

/** `seen` holds the arrays and objects on the path to `value`: its size is the depth. */
function write(value: unknown, seen: Set<object>, maxDepth: number): string | undefined {
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    value = (value as { toJSON: () => unknown }).toJSON();
  }
  switch (typeof value) {
    case 'string':
    case 'number':
    case 'boolean':
      return JSON.stringify(value);
    case 'bigint':
      return JSON.stringify(value.toString());
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
  }
  if (value === null) return 'null';
  const object = value as object;
  if (seen.has(object)) return '"[Circular]"';
  if (seen.size >= maxDepth) throw new JsonNestingTooDeepError(maxDepth);
  seen.add(object);
  try {
    if (Array.isArray(object)) return `[${object.map((item) => write(item, seen, maxDepth) ?? 'null').join(',')}]`;
    const parts: string[] = [];
    for (const key of Object.keys(object).sort()) {
      const text = write((object as Record<string, unknown>)[key], seen, maxDepth);
      if (text !== undefined) parts.push(`${JSON.stringify(key)}:${text}`);
    }
    return `{${parts.join(',')}}`;
  } finally {
    seen.delete(object);
  }
}

/** Runs `compute`; a `JsonNestingTooDeepError` it throws is replaced by the error `tooDeep()` returns. */
export function withinJsonDepth<T>(compute: () => T, tooDeep: () => Error): T {
  try {
    return compute();
  } catch (error) {
    if (!(error instanceof JsonNestingTooDeepError)) throw error;
    throw tooDeep();
  }
}
