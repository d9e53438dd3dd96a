import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import {
  GUARDS_METADATA,
  INTERCEPTORS_METADATA,
  PARAMTYPES_METADATA,
  PATH_METADATA,
  ROUTE_ARGS_METADATA,
} from '@nestjs/common/constants';
import { Payload } from '@nestjs/microservices';
import { PATTERN_HANDLER_METADATA } from '@nestjs/microservices/constants';
import { IDEMPOTENT_OPTIONS } from './idempotency.constants';
import { idempotentHandlerGuardFor } from './idempotent-handler.guard';
import { takeGuardedCall, UNGUARDED_MESSAGE, UNKEYED_REQUEST } from './guarded-call';
import type { IdempotentOptions } from './idempotency.options';
import { idempotencyInterceptorFor, isIdempotencyInterceptorFor } from './named-idempotency.interceptor';

/**
 * The guarded path: `@Idempotent()` on an HTTP route or an `@EventPattern`/`@MessagePattern` method guards it
 * without an interceptor. A Nest interceptor chain wraps every call in Observables (measured: 16 % of a plain
 * route's throughput and 8–14 % of a plain consumer's, docs/performance.md); a guard and a parameter cost a few
 * microseconds. The method's interceptor is swapped for `IdempotentHandlerGuard`, which reads the key before the
 * pipes run, and a hidden last parameter that hands the guard's `GuardedCall` to the method's wrapper
 * (`handler-start.ts`), which runs the body through the interceptor's own steps: the same key, transaction, commit,
 * replay (and, for messages, acknowledgement). Docs call it the route path and the message path.
 *
 * Decided once the class is complete: a microtask queued by the decorator runs after every decorator of the class
 * (`@Post`/`@EventPattern` may sit above or below `@Idempotent()`), and before Nest reads any metadata. A
 * class-level `@Idempotent()` on a consumer decides synchronously (`guardConsumerClass`): class decorators run after
 * the methods'; on any other class its interceptor guards every method.
 */
export function queueGuardedPath(controller: Function, method: string | symbol, dataSource: string | undefined): void {
  queueMicrotask(() => {
    // A class-level `@Idempotent()` has decided for every method already (its interceptor, or `guardConsumerClass`).
    if (Reflect.getMetadata(IDEMPOTENT_OPTIONS, controller) !== undefined) return;
    const handler = (controller.prototype as Record<string | symbol, unknown>)[method];
    if (typeof handler !== 'function') return;
    if (!idempotencyInterceptors(handler).includes(idempotencyInterceptorFor(dataSource))) return;
    takeGuardedPath(controller.prototype, method, handler, dataSource);
  });
}

/**
 * A class-level `@Idempotent()` on a consumer — a controller whose own methods include message handlers and no HTTP
 * route — gives each message handler the message path instead of putting a class-level interceptor in front of
 * every message. Returns false, and the class keeps its interceptor, for a controller with HTTP routes (so that
 * their interceptors keep their order) and for a subclass (the methods it inherits would lose their guard).
 */
export function guardConsumerClass(controller: Function, dataSource: string | undefined): boolean {
  const prototype = controller.prototype as Record<string, unknown>;
  if (Object.getPrototypeOf(prototype) !== Object.prototype) return false;
  const methods = Object.getOwnPropertyNames(prototype)
    .filter((name) => name !== 'constructor')
    .map((name) => [name, Object.getOwnPropertyDescriptor(prototype, name)?.value] as const)
    .filter((entry): entry is readonly [string, Function] => typeof entry[1] === 'function');
  if (methods.some(([, handler]) => Reflect.getMetadata(PATH_METADATA, handler) !== undefined)) return false;
  const handlers = methods.filter(
    ([, handler]) => Reflect.getMetadata(PATTERN_HANDLER_METADATA, handler) !== undefined,
  );
  if (handlers.length === 0) return false;
  for (const [name, handler] of handlers) {
    // A method's own `@Idempotent()` without a dataSource was guarded by the class's interceptor: the class's applies.
    const own: IdempotentOptions | undefined = Reflect.getMetadata(IDEMPOTENT_OPTIONS, handler);
    takeGuardedPath(prototype, name, handler, own?.dataSource ?? dataSource);
  }
  return true;
}

/**
 * Swaps the library's interceptors of `handler` for the guard of `dataSource` and the hidden parameter, when it is
 * an HTTP route or a message handler; a method that is both keeps the interceptor, which guards both.
 */
function takeGuardedPath(
  prototype: object,
  method: string | symbol,
  handler: Function,
  dataSource: string | undefined,
) {
  const route = Reflect.getMetadata(PATH_METADATA, handler) !== undefined;
  const pattern = Reflect.getMetadata(PATTERN_HANDLER_METADATA, handler) !== undefined;
  if (route === pattern) return;
  const ours = new Set(idempotencyInterceptors(handler));
  const interceptors: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, handler) ?? [];
  Reflect.defineMetadata(
    INTERCEPTORS_METADATA,
    interceptors.filter((each) => !ours.has(each as Function)),
    handler,
  );
  const guards: unknown[] = Reflect.getMetadata(GUARDS_METADATA, handler) ?? [];
  Reflect.defineMetadata(GUARDS_METADATA, [...guards, idempotentHandlerGuardFor(dataSource)], handler);
  addCallParameter(prototype, method, handler, pattern);
}

/** The interceptors `@Idempotent()` applied to `handler` (not an app's own subclass of the interceptor). */
function idempotencyInterceptors(handler: Function): Function[] {
  const interceptors: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, handler) ?? [];
  return interceptors.filter((each): each is Function => isIdempotencyInterceptorFor(each));
}

/**
 * The hidden parameter: the call the guard left for this handler; else, for a request, `UNKEYED_REQUEST` (the guard
 * let it through unguarded) and, for a message, `UNGUARDED_MESSAGE`.
 */
const GuardedCallParameter = createParamDecorator(
  (_data: unknown, context: ExecutionContext) =>
    takeGuardedCall(context) ?? (context.getType() === 'http' ? UNKEYED_REQUEST : UNGUARDED_MESSAGE),
);

/**
 * Appends the hidden parameter after every declared one. A message handler without parameter decorators gets the
 * data as its only argument; with one decorator, only what the decorators declare: the data is declared here so
 * that it stays (Nest's default made explicit). A route without them gets no arguments, as before.
 */
function addCallParameter(prototype: object, method: string | symbol, handler: Function, message: boolean): void {
  const controller = prototype.constructor;
  const declared = (): { index: number }[] =>
    Object.values(Reflect.getMetadata(ROUTE_ARGS_METADATA, controller, method) ?? {});
  if (message && declared().length === 0) Payload()(prototype, method as string, 0);
  const paramTypes: unknown[] = Reflect.getMetadata(PARAMTYPES_METADATA, prototype, method) ?? [];
  const index = Math.max(paramTypes.length, handler.length, ...declared().map((each) => each.index + 1));
  GuardedCallParameter()(prototype, method as string, index);
}
