import type { ExecutionContext } from '@nestjs/common';

/**
 * What the library keeps per-call state by (the accepted key, which application of the interceptor guards a
 * handler): the request (HTTP, argument 0); for a message its transport context (argument 1),
 * else its data (argument 0). Read by index, as `switchToHttp().getRequest()` and `switchToRpc().getContext()` would,
 * without the closures those build on every call. Undefined when there is no object to key by.
 */
export function callHolder(context: ExecutionContext): object | undefined {
  if (context.getType() === 'http') return asHolder(context.getArgByIndex(0));
  return asHolder(context.getArgByIndex(1)) ?? asHolder(context.getArgByIndex(0));
}

function asHolder(value: unknown): object | undefined {
  return (typeof value === 'object' && value !== null) || typeof value === 'function' ? (value as object) : undefined;
}
