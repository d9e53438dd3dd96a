import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import { contextSlot } from '../util/context-slots';
import type { StepScope } from './steps/step-scope';

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

/**
 * Whether the handler's own body began to run. Nest calls an interceptor's `next.handle()` before the pipes, so a
 * `ValidationPipe` 400 reaches the interceptor like an error of the handler; only a handler that started has an
 * outcome to keep. `@Idempotent()` wraps the methods it guards so that they mark their start here.
 */

/** The mark of one call: set to true when the handler's body is entered. */
export interface HandlerStart {
  started: boolean;
  /** The call's steps (`idempotentStep()`), created on first use; undefined once the handler settled. */
  steps?: () => StepScope | undefined;
  /** The call's idempotency record while its handler runs: the cause of the messages it emits (`trace()`). */
  cause?: CallCause;
}

/** The idempotency record of a running call: the outbox's DataSource it is recorded in, its scope and key. */
export interface CallCause {
  /** The DataSource's name (`'default'` for the default one): only that outbox records the cause. */
  dataSource: string;
  scope: string;
  key: string;
}

/** The start mark, in the library's one async context (`context-slots.ts`). */
const starts = contextSlot<HandlerStart>('idempotent handler start');

/** Runs `work` (which calls the handler) with `mark` as the call's start mark. */
export function trackHandlerStart<T>(mark: HandlerStart, work: () => T): T {
  return starts.run(mark, work);
}

/** The mark of the call running in this async context, if any. */
export function currentHandlerStart(): HandlerStart | undefined {
  return starts.get();
}

/** `method` that marks the start of its call before it runs; its name, length and reflect metadata are carried over. */
export function markingStart<F extends (...args: any[]) => unknown>(method: F): F {
  const marked = function (this: unknown, ...args: unknown[]) {
    const mark = starts.get();
    if (mark) mark.started = true;
    return method.apply(this, args);
  };
  Object.defineProperty(marked, 'name', { value: method.name });
  Object.defineProperty(marked, 'length', { value: method.length });
  for (const key of Reflect.getMetadataKeys(method)) {
    Reflect.defineMetadata(key, Reflect.getMetadata(key, method), marked);
  }
  return marked as unknown as F;
}

/** The record (scope, key) of the idempotent call running in this async context, when it is one of `dataSource`'s. */
export function currentCause(dataSource: string): { scope: string; key: string } | undefined {
  const cause = starts.get()?.cause;
  return cause && cause.dataSource === dataSource ? { scope: cause.scope, key: cause.key } : undefined;
}
