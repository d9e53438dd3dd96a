/** What a driver error and its wrappers may carry, as the classifiers read it. */
export interface ErrorFields {
  code?: unknown;
  errno?: unknown;
  message?: unknown;
}

/**
 * True when `matches` holds for `error` or for an error it wraps — TypeORM's `driverError`, `cause`, the errors of
 * an `AggregateError` (a dual-stack connect) — looking at 16 objects at most, each once.
 */
export function someInErrorChain(error: unknown, matches: (error: object & ErrorFields) => boolean): boolean {
  const pending: unknown[] = [error];
  const seen = new Set<unknown>();
  while (pending.length > 0 && seen.size < 16) {
    const current = pending.pop();
    if (typeof current !== 'object' || current === null || seen.has(current)) continue;
    seen.add(current);
    if (matches(current as object & ErrorFields)) return true;
    const { driverError, cause, errors } = current as { driverError?: unknown; cause?: unknown; errors?: unknown };
    pending.push(driverError, cause);
    if (Array.isArray(errors)) pending.push(...errors);
  }
  return false;
}
