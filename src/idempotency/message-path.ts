import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import {
  GUARDS_METADATA,
  INTERCEPTORS_METADATA,
  PARAMTYPES_METADATA,
  ROUTE_ARGS_METADATA,
} from '@nestjs/common/constants';
import { extendArrayMetadata } from '@nestjs/common/utils/extend-metadata.util';
import { Payload } from '@nestjs/microservices';
import { PATTERN_HANDLER_METADATA } from '@nestjs/microservices/constants';
import { IDEMPOTENT_OPTIONS } from './idempotency.constants';
import { idempotentMessageGuardFor } from './idempotent-message.guard';
import { takeGuardedCall, UNGUARDED_MESSAGE } from './message-call';
import { idempotencyInterceptorFor } from './named-idempotency.interceptor';

/**
 * The message path: `@Idempotent()` on an `@EventPattern`/`@MessagePattern` method guards it without an
 * interceptor. A Nest interceptor chain wraps every call in Observables (measured: 8–14 % of a plain consumer's
 * throughput, docs/performance.md); a guard and a parameter cost a few microseconds. The method's interceptor is
 * swapped for `IdempotentMessageGuard`, which reads the key before the pipes run, and a hidden last parameter that
 * hands the guard's `GuardedMessageCall` to the method's wrapper (`handler-start.ts`), which runs the body through
 * the interceptor's own steps: the same claim, transaction, commit and acknowledgement.
 *
 * Decided once the class is complete: a microtask queued by the decorator runs after every decorator of the class
 * (`@EventPattern` may sit above or below `@Idempotent()`), and before Nest reads any metadata. A class-level
 * `@Idempotent()` keeps its interceptor (it guards HTTP routes of the class alike).
 */
export function queueMessagePath(controller: Function, method: string | symbol, dataSource: string | undefined): void {
  queueMicrotask(() => takeMessagePath(controller, method, dataSource));
}

function takeMessagePath(controller: Function, method: string | symbol, dataSource: string | undefined): void {
  const prototype = controller.prototype as Record<string | symbol, unknown>;
  const handler = prototype[method];
  if (typeof handler !== 'function') return;
  if (Reflect.getMetadata(PATTERN_HANDLER_METADATA, handler) === undefined) return; // an HTTP route
  if (Reflect.getMetadata(IDEMPOTENT_OPTIONS, controller) !== undefined) return; // the class's interceptor guards
  const interceptor = idempotencyInterceptorFor(dataSource);
  const interceptors: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, handler) ?? [];
  if (!interceptors.includes(interceptor)) return;
  Reflect.defineMetadata(
    INTERCEPTORS_METADATA,
    interceptors.filter((each) => each !== interceptor),
    handler,
  );
  extendArrayMetadata(GUARDS_METADATA, [idempotentMessageGuardFor(dataSource)], handler);
  addCallParameter(prototype, method, handler);
}

/** The hidden parameter: the call the guard left for this handler, or `UNGUARDED_MESSAGE`. */
const GuardedCallParameter = createParamDecorator(
  (_data: unknown, context: ExecutionContext) => takeGuardedCall(context) ?? UNGUARDED_MESSAGE,
);

/** Appends the hidden parameter after every declared one (Nest's default, the data first, made explicit). */
function addCallParameter(prototype: object, method: string | symbol, handler: Function): void {
  const controller = prototype.constructor;
  const declared = (): { index: number }[] =>
    Object.values(Reflect.getMetadata(ROUTE_ARGS_METADATA, controller, method) ?? {});
  // A method without parameter decorators gets the data as its only argument; with one decorator, only what the
  // decorators declare: the data is declared here so that it stays.
  if (declared().length === 0) Payload()(prototype, method as string, 0);
  const paramTypes: unknown[] = Reflect.getMetadata(PARAMTYPES_METADATA, prototype, method) ?? [];
  const index = Math.max(paramTypes.length, handler.length, ...declared().map((each) => each.index + 1));
  GuardedCallParameter()(prototype, method as string, index);
}
