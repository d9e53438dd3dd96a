import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import { callHolder } from './call-holder';

/** Keys accepted by the interceptor, per request (HTTP) or transport context, else data (messages). */
const keys = new WeakMap<object, string>();

/** Called by the interceptor once it has accepted a key. */
export function rememberIdempotencyKey(context: ExecutionContext, key: string): void {
  const holder = callHolder(context);
  if (holder) keys.set(holder, key);
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
  const holder = callHolder(context);
  return holder ? keys.get(holder) : undefined;
});
