import { Readable } from 'node:stream';
import { ExecutionContext, HttpException, HttpStatus, StreamableFile } from '@nestjs/common';
import { HTTP_CODE_METADATA } from '@nestjs/common/constants';
import type { Reflector } from '@nestjs/core';
import { toPlain } from './class-transformer.loader';
import type { StoredIdempotencyRecord } from '../dialects/key-store';
import type { ResolvedIdempotentOptions, StoredResponse } from './idempotent-call.types';
import { IDEMPOTENT_REPLAYED_HEADER } from './idempotency.options';

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
