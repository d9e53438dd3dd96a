import { createHash } from 'node:crypto';
import type { ExecutionContext } from '@nestjs/common';
import type { ResolvedIdempotentOptions } from './idempotent-call.types';
import { MAX_IDEMPOTENCY_KEY_LENGTH } from './idempotency.options';

/** The scope a call's key belongs to, and the bound on the length of a stored scope or key. */

/** The `scope` option's value, else `fallback` (also when the option returns undefined or null). */
export function scopeFromOption(
  context: ExecutionContext,
  options: ResolvedIdempotentOptions,
  fallback: string,
): string | Promise<string> {
  if (!options.scope) return fallback;
  const scope = options.scope(context);
  if (scope instanceof Promise) return scope.then((s) => (s === undefined || s === null ? fallback : String(s)));
  return scope === undefined || scope === null ? fallback : String(scope);
}

/** The text if it fits the column's 255 characters, else `sha256:` and its SHA-256 (hex). */
export function boundedText(text: string): string {
  return text.length <= MAX_IDEMPOTENCY_KEY_LENGTH ? text : `sha256:${createHash('sha256').update(text).digest('hex')}`;
}
