/**
 * JSON text of `value` with object keys sorted at every depth, so two bodies that differ only in key order give the
 * same text (and the same fingerprint). Follows `JSON.stringify` otherwise: `toJSON()` is honoured (Dates), and
 * `undefined`, functions and symbols are dropped from objects and become `null` in arrays. BigInt becomes its
 * decimal string (JSON.stringify would throw). Cycles are cut and marked, never followed.
 */
export function stableJson(value: unknown): string {
  return write(value, new Set()) ?? 'null';
}

function write(value: unknown, seen: Set<object>): string | undefined {
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
  seen.add(object);
  try {
    if (Array.isArray(object)) return `[${object.map((item) => write(item, seen) ?? 'null').join(',')}]`;
    const parts: string[] = [];
    for (const key of Object.keys(object).sort()) {
      const text = write((object as Record<string, unknown>)[key], seen);
      if (text !== undefined) parts.push(`${JSON.stringify(key)}:${text}`);
    }
    return `{${parts.join(',')}}`;
  } finally {
    seen.delete(object);
  }
}
