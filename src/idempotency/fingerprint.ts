import { sha256Hex } from '../util/sha256';
import { OutboxError, type OutboxErrorCode } from '../errors';
import { MAX_IDEMPOTENCY_KEY_LENGTH } from './idempotency.options';

/**
 * SHA-256 (hex, 64 characters) of the stable JSON of `parts`: independent of the key order of any object in it.
 * Throws `JsonNestingTooDeepError` when a part is nested more than `MAX_JSON_DEPTH` levels deep.
 */
export function fingerprintOf(...parts: unknown[]): string {
  let text: string;
  try {
    // + 1: the array of parts itself.
    text = stableJson(parts, MAX_JSON_DEPTH + 1);
  } catch (error) {
    throw error instanceof JsonNestingTooDeepError ? new JsonNestingTooDeepError(MAX_JSON_DEPTH) : error;
  }
  return sha256Hex(text);
}

/** Deepest nesting of arrays and objects `stableJson` accepts by default (a request body nested deeper is refused). */
export const MAX_JSON_DEPTH = 1000;

/** A value is nested deeper than `stableJson` accepts (its fingerprint is not computed; the request gets a 400). */
export class JsonNestingTooDeepError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_JSON_TOO_DEEP';

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

/** Marks a value `leafText()` leaves to the caller: a non-null array or object. */
const BRANCH = Symbol('array or object');

/** What `JSON.stringify` writes for `value`: the result of its `toJSON()` when it has one (a Date), else itself. */
function jsonValueOf(value: unknown): unknown {
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    return (value as { toJSON: () => unknown }).toJSON();
  }
  return value;
}

/**
 * The text of a value that is neither an array nor an object (BigInt as its decimal string), `undefined` for what
 * JSON leaves out (undefined, functions, symbols), or `BRANCH` for a non-null array or object.
 */
function leafText(value: unknown): string | undefined | typeof BRANCH {
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
  return value === null ? 'null' : BRANCH;
}

/** `write` for values at most `limit` arrays and objects deep; throws `DEEPER` beyond. */
function writeShallow(value: unknown, depth: number, limit: number): string | undefined {
  value = jsonValueOf(value);
  const leaf = leafText(value);
  if (leaf !== BRANCH) return leaf;
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
  value = jsonValueOf(value);
  const leaf = leafText(value);
  if (leaf !== BRANCH) return leaf;
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

/** A stored scope or key: the text if it fits the column's 255 characters, else `sha256:` and its SHA-256 (hex). */
export function boundedText(text: string): string {
  return text.length <= MAX_IDEMPOTENCY_KEY_LENGTH ? text : `sha256:${sha256Hex(text)}`;
}
