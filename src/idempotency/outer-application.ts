import type { ExecutionContext } from '@nestjs/common';
import { callHolder } from './call-holder';

/**
 * `@Idempotent()` on a controller and on its method applies the interceptor twice: the outer application guards
 * the handler, the inner one lets it through. Tracked per request (HTTP) or transport context (messages) and per
 * handler: two handlers of one message share its transport context, and each is guarded.
 */
const guarded = new WeakMap<object, object | Set<object>>();

/** Whether an outer application of an idempotency interceptor already guards this handler for this request. */
export function isGuardedByOuterApplication(context: ExecutionContext): boolean {
  const holder = callHolder(context);
  if (!holder) return false;
  const handler = context.getHandler();
  // One handler (nearly always) is kept as it is; a Set only once a second handler shares the holder.
  const seen = guarded.get(holder);
  if (seen === undefined) {
    guarded.set(holder, handler);
    return false;
  }
  if (seen === handler) return true;
  if (seen instanceof Set) {
    if (seen.has(handler)) return true;
    seen.add(handler);
    return false;
  }
  guarded.set(holder, new Set([seen, handler]));
  return false;
}
