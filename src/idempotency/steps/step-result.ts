import { IdempotentStepResultError } from './step.errors';

/**
 * A step's result is stored as JSON text and handed back parsed, on the first run as on a resumed one, so the
 * handler sees the same value either way. What survives: strings, finite numbers, booleans, null, arrays and plain
 * objects of those. A Date becomes its ISO string; a class instance a plain object of its own enumerable fields (or
 * what its `toJSON()` returns); NaN and ±Infinity become null; `undefined` (also a function or a symbol) as the
 * whole result becomes undefined, inside an object the field is dropped. A BigInt or a circular structure cannot be
 * stored: `IdempotentStepResultError`.
 */

/** The JSON text of `value`, or null for undefined. */
export function serializeStepResult(step: string, value: unknown): string | null {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new IdempotentStepResultError(
      `The step '${step}' ran, but its result cannot be stored as JSON (${(error as Error).message}), so a retry ` +
        'would run it again. Return plain JSON data from the callback (convert a BigInt to a string, drop cycles).',
    );
  }
  return text === undefined ? null : text;
}

/** The value a stored result stands for. */
export function parseStepResult(text: string | null): unknown {
  return text === null ? undefined : JSON.parse(text);
}
