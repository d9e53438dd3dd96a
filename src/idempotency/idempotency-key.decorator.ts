import { createParamDecorator, ExecutionContext } from '@nestjs/common';

/** Keys accepted by the interceptor, per request object (HTTP) or transport context (messages). */
const keys = new WeakMap<object, string>();

/** Called by the interceptor once it has accepted a key. */
export function rememberIdempotencyKey(context: ExecutionContext, key: string): void {
  const holder = holderOf(context);
  if (holder) keys.set(holder, key);
}

function holderOf(context: ExecutionContext): object | undefined {
  // The request (HTTP: argument 0) or the transport context (RPC: argument 1), as `switchToHttp().getRequest()` and
  // `switchToRpc().getContext()` read them, without the closures those build on every call.
  const holder = context.getArgByIndex(context.getType() === 'http' ? 0 : 1);
  return typeof holder === 'object' && holder !== null ? holder : undefined;
}

/**
 * The idempotency key of the current request or message (as `@Idempotent()` accepted it), for handlers that pass it
 * on — to a payment provider, for instance, so that an external side effect is deduplicated as well. Undefined when
 * the handler is not guarded or the request carried no key.
 *
 * ```ts
 * @Post() @Idempotent()
 * charge(@Body() dto: ChargeDto, @IdempotencyKey() key: string) { return this.psp.charge(dto, { idempotencyKey: key }); }
 * ```
 */
export const IdempotencyKey = createParamDecorator((_data: unknown, context: ExecutionContext): string | undefined => {
  const holder = holderOf(context);
  return holder ? keys.get(holder) : undefined;
});
