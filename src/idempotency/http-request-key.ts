import type { ExecutionContext } from '@nestjs/common';
import { fingerprintOf } from './fingerprint';
import type { ResolvedIdempotentOptions } from './idempotent-call.types';
import { MAX_IDEMPOTENCY_KEY_LENGTH } from './idempotency.options';
import { IdempotencyProblemException, invalidKeyProblem, malformedKeyProblem } from './idempotency.problems';
import { parseIdempotencyKey } from './structured-key';

/**
 * What identifies an HTTP request to `@Idempotent()`: its key (header or custom extractor), whether that key is
 * acceptable, the authenticated principal it is scoped to and the request's fingerprint. Imported as `httpRequest`.
 */

/** Safe methods are idempotent by definition (a class-level `@Idempotent()` must not demand keys for reads). */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Whether the request's method is safe (GET, HEAD, OPTIONS): no key is read for it. */
export function isSafeMethod(request: any): boolean {
  return SAFE_METHODS.has(request.method);
}

/** The key from the header (or the custom extractor); undefined when absent. */
export function readKey(
  context: ExecutionContext,
  request: any,
  options: ResolvedIdempotentOptions,
): string | undefined {
  const raw = options.key ? options.key(request, context) : request.headers?.[options.headerKey];
  if (raw === undefined || raw === null) return undefined;
  return Array.isArray(raw) ? raw.join(', ') : String(raw);
}

/**
 * The key a raw header value carries: a quoted RFC 8941 sf-string without its quotes, or a bare key as it is. Throws
 * `reject`'s 400 problem for a malformed quoted key, an empty one or one over `max` characters (`maxKeyLength`).
 */
export function acceptKey(
  raw: string,
  header: string,
  reject: (problem: IdempotencyProblemException) => IdempotencyProblemException,
  max: number = MAX_IDEMPOTENCY_KEY_LENGTH,
): string {
  const parsed = parseIdempotencyKey(raw);
  if (!parsed.ok) throw reject(malformedKeyProblem(header, parsed.reason));
  if (!isAcceptableKey(parsed.key, max)) {
    throw reject(invalidKeyProblem(header, max, parsed.key.length));
  }
  return parsed.key;
}

/** Whether a key may be used: not blank, and at most `max` (default 255) characters. */
export function isAcceptableKey(key: string, max: number = MAX_IDEMPOTENCY_KEY_LENGTH): boolean {
  return key.trim().length > 0 && key.length <= max;
}

/**
 * The authenticated principal of a request: `request.user.id`, else `request.user.sub` (as Passport strategies and
 * JWT guards set them), as a string; undefined when there is none (or it is empty).
 */
export function principalOf(request: any): string | undefined {
  const user = request?.user;
  if (typeof user !== 'object' || user === null) return undefined;
  const id = user.id ?? user.sub;
  if (id === undefined || id === null) return undefined;
  const text = String(id);
  return text.length > 0 ? text : undefined;
}

/**
 * The request's fingerprint: of the `fingerprint` option's value, else of the method, path, query and body
 * (key-order independent). Throws `JsonNestingTooDeepError` for a request nested too deeply.
 */
export function fingerprint(context: ExecutionContext, request: any, options: ResolvedIdempotentOptions): string {
  if (options.fingerprint) return fingerprintOf(options.fingerprint(request, context));
  const url: string = request.originalUrl ?? request.url ?? '';
  const query = url.indexOf('?');
  return fingerprintOf(
    request.method,
    query === -1 ? url : url.slice(0, query),
    request.query ?? null,
    request.body ?? null,
  );
}
