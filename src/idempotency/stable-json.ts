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
  try {
    return writeShallow(value, 0, Math.min(SHALLOW_DEPTH, maxDepth)) ?? 'null';
  } catch (error) {
    if (error !== DEEPER) throw error;
  }
  return write(value, new Set(), maxDepth) ?? 'null';
}

/**
 * How deep the first pass goes without tracking the path: a value within it has no cycle (a cycle never ends), and
 * the text is the same the careful pass would write; a deeper one is written again by the careful pass, which cuts
 * cycles and enforces `maxDepth`. Request bodies and messages almost always fit, and skip the bookkeeping.
 */
const SHALLOW_DEPTH = 32;
const DEEPER = new Error('deeper than the shallow pass goes');

/** `write` for values at most `limit` arrays and objects deep; throws `DEEPER` beyond. */
function writeShallow(value: unknown, depth: number, limit: number): string | undefined {
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
  if (depth >= limit) throw DEEPER;
  if (Array.isArray(value)) {
    let text = '[';
    for (let i = 0; i < value.length; i++)
      text += `${i ? ',' : ''}${writeShallow(value[i], depth + 1, limit) ?? 'null'}`;
    return `${text}]`;
  }
  let text = '{';
  for (const key of Object.keys(value as object).sort()) {
    const item = writeShallow((value as Record<string, unknown>)[key], depth + 1, limit);
    if (item !== undefined) text += `${text.length > 1 ? ',' : ''}${JSON.stringify(key)}:${item}`;
  }
  return `${text}}`;
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
    if (Array.isArray(object)) {
      const items: string[] = [];
      for (let i = 0; i < object.length; i++) items.push(write(object[i], seen, maxDepth) ?? 'null');
      return `[${items.join(',')}]`;
    }
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
