import { OutboxSerializationError } from '../errors';

/**
 * `JSON.stringify` that refuses what JSON would silently drop or mangle: BigInt, functions, symbols, `undefined`
 * at the top level, and cycles. `what` names the value in the error ("payload", "headers"), `call` the API.
 */
export function serializeJson(value: unknown, what: string, call = 'emit()'): string {
  let path = '';
  const replacer = function (this: unknown, key: string, v: unknown) {
    const kind = typeof v;
    if (kind === 'bigint' || kind === 'function' || kind === 'symbol') {
      path = key;
      throw new OutboxSerializationError(
        `The ${what} of ${call} holds a ${kind}${key ? ` at key "${key}"` : ''}, which JSON cannot carry. ` +
          (kind === 'bigint'
            ? 'Convert it to a string (value.toString()) or a number first.'
            : 'Remove it, or map the object to plain data first.'),
      );
    }
    return v;
  };
  let text: string | undefined;
  try {
    text = JSON.stringify(value, replacer);
  } catch (error) {
    if (error instanceof OutboxSerializationError) throw error;
    const message = (error as Error)?.message ?? String(error);
    throw new OutboxSerializationError(
      `The ${what} of ${call} cannot be serialized to JSON${path ? ` (at key "${path}")` : ''}: ${message}. ` +
        'Pass plain data without cycles (map entities to a DTO first).',
    );
  }
  if (text === undefined) {
    throw new OutboxSerializationError(
      `The ${what} of ${call} is undefined, which JSON cannot carry. Pass null or an object.`,
    );
  }
  return text;
}
