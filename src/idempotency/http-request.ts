import { ExecutionContext, HttpException, HttpStatus, StreamableFile } from '@nestjs/common';
import { fingerprintOf } from './fingerprint';
import {
  IDEMPOTENT_REPLAYED_HEADER,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  type ResolvedIdempotentOptions,
  type StoredResponse,
} from './idempotency.options';
import { IdempotencyProblemException, invalidKeyProblem, malformedKeyProblem } from './idempotency.problems';
import { Readable } from 'node:stream';
import { HTTP_CODE_METADATA } from '@nestjs/common/constants';
import type { Reflector } from '@nestjs/core';
import type { StoredIdempotencyRecord } from '../dialects/key-store';

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

/**
 * Reads an idempotency key as draft-ietf-httpapi-idempotency-key-header writes it: an RFC 8941 Structured Field
 * String (`"8e03978e-…"`, parsed per RFC 8941 §4.2.5, the quotes not part of the key), or today's bare token.
 */

/** A key read from the header: its value, or why the quoted form was malformed (a sentence for the client). */
export type ParsedKey = { ok: true; key: string } | { ok: false; reason: string };

const DQUOTE = '"';
const BACKSLASH = '\\';

/** Whether a character is optional whitespace (SP or HTAB), which may surround a field value. */
function isOws(char: string): boolean {
  return char === ' ' || char === '\t';
}

/**
 * The key a header value carries. A value that starts with `"` (after optional whitespace) is an sf-string: printable
 * ASCII (0x20–0x7E) between double quotes, `\"` and `\\` the only escapes, nothing but whitespace after the closing
 * quote. Any other value is a bare key, taken as it is.
 */
export function parseIdempotencyKey(raw: string): ParsedKey {
  let start = 0;
  while (start < raw.length && isOws(raw[start])) start++;
  if (raw[start] !== DQUOTE) return { ok: true, key: raw };
  let key = '';
  for (let i = start + 1; i < raw.length; i++) {
    const char = raw[i];
    const code = char.charCodeAt(0);
    if (char === BACKSLASH) {
      const escaped = raw[++i];
      if (escaped !== DQUOTE && escaped !== BACKSLASH) return malformed(BAD_ESCAPE);
      key += escaped;
    } else if (char === DQUOTE) {
      return trailingOnlyOws(raw, i + 1) ? { ok: true, key } : malformed(TRAILING);
    } else if (code < 0x20 || code > 0x7e) {
      return malformed(NOT_ASCII);
    } else {
      key += char;
    }
  }
  return malformed(UNTERMINATED);
}

function trailingOnlyOws(raw: string, from: number): boolean {
  for (let i = from; i < raw.length; i++) if (!isOws(raw[i])) return false;
  return true;
}

function malformed(reason: string): ParsedKey {
  return { ok: false, reason };
}

const UNTERMINATED = 'the quoted key has no closing double quote: end it with `"`';
const BAD_ESCAPE = 'a backslash in a quoted key may only escape `"` or `\\`: write `\\"` or `\\\\`, nothing else';
const NOT_ASCII =
  'a quoted key may hold only printable ASCII characters (0x20–0x7E): leave out control and non-ASCII characters';
const TRAILING =
  'nothing but whitespace may follow the closing double quote of a quoted key: remove what comes after it';

/**
 * The response an idempotency record keeps: captured from the handler's value and the HTTP response after the
 * handler ran, and sent again (status, headers, body) to a retry. Works with express and fastify.
 */

/** JSON text of what the client receives, or null for no body. */
export function serializeBody(value: unknown): string | null {
  if (value === undefined) return null;
  return JSON.stringify(toPlain(value)) ?? null;
}

/** The value a stored JSON body stands for (undefined for no body). */
export function parseBody(body: string | null): unknown {
  return body === null ? undefined : JSON.parse(body);
}

/**
 * The serialized response: what the client receives (class instances through class-transformer's `instanceToPlain`),
 * the route's status code (`@HttpCode()`, else 201 for POST and 200 otherwise) and the `replayHeaders` already set.
 * Undefined for a stream (not replayable).
 */
export function captureResponse(
  reflector: Reflector,
  context: ExecutionContext,
  value: unknown,
  options: ResolvedIdempotentOptions,
): StoredResponse | undefined {
  if (value instanceof StreamableFile || value instanceof Readable || Buffer.isBuffer(value)) return undefined;
  const response = context.switchToHttp().getResponse();
  const request = context.switchToHttp().getRequest();
  const status =
    reflector.get<number | undefined>(HTTP_CODE_METADATA, context.getHandler()) ??
    (request.method === 'POST' ? HttpStatus.CREATED : HttpStatus.OK);
  let headers: Record<string, unknown> | null = null;
  for (const name of options.replayHeaders) {
    const header = getHeader(response, name);
    if (header !== undefined) (headers ??= {})[name] = header;
  }
  return { status, body: serializeBody(value), headers: headers ? JSON.stringify(headers) : null };
}

/**
 * Sets the record's status and headers on the response, marked `Idempotent-Replayed: true`; returns its body. A
 * kept failure (status 400 and up) is thrown again as an `HttpException` with its status and body, so the app's
 * exception filters answer the retry as they answered the first request (a problem+json filter included).
 */
export function replayResponse(context: ExecutionContext, record: StoredIdempotencyRecord): unknown {
  const response = context.switchToHttp().getResponse();
  setHeader(response, IDEMPOTENT_REPLAYED_HEADER, 'true');
  if (record.headers) {
    for (const [name, value] of Object.entries(JSON.parse(record.headers) as Record<string, string | string[]>)) {
      setHeader(response, name, value);
    }
  }
  if (record.status !== null && record.status >= 400) {
    throw new HttpException(parseBody(record.body) as Record<string, unknown>, record.status);
  }
  if (record.status !== null && typeof response.status === 'function') response.status(record.status);
  return parseBody(record.body);
}

function setHeader(response: any, name: string, value: string | string[]): void {
  if (typeof response.header === 'function') response.header(name, value);
  else response.setHeader(name, value);
}

function getHeader(response: any, name: string): unknown {
  return typeof response.getHeader === 'function' ? response.getHeader(name) : undefined;
}

/**
 * class-transformer is an optional peer: when the app has it, stored responses go through `instanceToPlain` (as
 * `ClassSerializerInterceptor` does), so `@Exclude()`d fields are never stored. Loaded once at startup with a dynamic
 * `import()`, which works from both the CommonJS and the ES module build.
 */
type ClassTransformer = { instanceToPlain(value: unknown): unknown };

let loaded: ClassTransformer | null | undefined;

/** Loads class-transformer if it is installed (called from `IdempotencyService.onModuleInit`). */
export async function loadClassTransformer(): Promise<void> {
  if (loaded !== undefined) return;
  try {
    const module = (await import('class-transformer')) as unknown as ClassTransformer & { default?: ClassTransformer };
    loaded = typeof module.instanceToPlain === 'function' ? module : (module.default ?? null);
  } catch {
    loaded = null;
  }
}

/** The value as the client receives it: class instances (and arrays of them) through `instanceToPlain`. */
export function toPlain(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  const plainObject = (v: unknown) => {
    const proto = Object.getPrototypeOf(v);
    return proto === null || proto === Object.prototype;
  };
  const needsTransform = Array.isArray(value)
    ? value.some((v) => typeof v === 'object' && v !== null && !plainObject(v))
    : !plainObject(value) && !(value instanceof Date);
  if (!needsTransform) return value;
  return loaded ? loaded.instanceToPlain(value) : value;
}
