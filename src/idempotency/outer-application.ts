import type { ExecutionContext } from '@nestjs/common';

/**
 * `@Idempotent()` on a controller and on its method applies the interceptor twice: the outer application guards
 * the handler, the inner one lets it through. Tracked per request (HTTP) or transport context (messages) and per
 * handler: two handlers of one message share its transport context, and each is guarded.
 */
const guarded = new WeakMap<object, Set<object>>();

/** Whether an outer application of an idempotency interceptor already guards this handler for this request. */
export function isGuardedByOuterApplication(context: ExecutionContext): boolean {
  const type = context.getType();
  const holder = type === 'http' ? context.switchToHttp().getRequest() : context.switchToRpc().getContext();
  if (typeof holder !== 'object' || holder === null) return false;
  const handler = context.getHandler();
  let handlers = guarded.get(holder);
  if (!handlers) guarded.set(holder, (handlers = new Set()));
  if (handlers.has(handler)) return true;
  handlers.add(handler);
  return false;
}
