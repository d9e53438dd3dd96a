/**
 * A low-cardinality name of what was thrown, for the `error.type` attribute of metrics and spans: the error's class
 * name (e.g. `OutboxPublishTimeoutError`), or `_OTHER` for a value that is not an `Error`.
 */
export function errorTypeOf(error: unknown): string {
  return error instanceof Error ? error.constructor?.name || error.name || 'Error' : '_OTHER';
}
