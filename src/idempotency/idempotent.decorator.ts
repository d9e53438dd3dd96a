import { applyDecorators, Injectable, SetMetadata, type Type, UseFilters } from '@nestjs/common';
import { INTERCEPTORS_METADATA, RESPONSE_PASSTHROUGH_METADATA, ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import { OutboxConfigurationError } from '../errors';
import { markingStart } from './call-marks';
import { IdempotencyProblemFilter } from './idempotency.problems';
import { IDEMPOTENT_OPTIONS, type IdempotentOptions } from './idempotency.options';
import { recordIdempotentRoute } from '../integrations/openapi-contract';
import { getOutboxToken, isDefaultDataSource } from '../outbox.constants';
import { withInjectedTokens } from '../util/named-providers';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import { IdempotencyService } from './idempotency.service';

/**
 * Makes a controller method (or every method of a controller) idempotent: HTTP requests by their
 * `Idempotency-Key`, message handlers (`@EventPattern`, `@MessagePattern`) by the outbox message id. The key is
 * recorded in the same transaction as the handler's writes: `OutboxService.manager`, `transaction()` and `emit()`
 * inside the handler join it. A method's options override its class's, which override the module's `idempotency`.
 *
 * On a method or a class, HTTP route or message handler alike, it guards through `IdempotencyInterceptor`, put first
 * among the method's (or the class's) interceptors whatever the decorators' order: the key is claimed before the
 * app's own interceptors there and the pipes run (docs/idempotency.md, "How a handler is guarded"). It wraps each
 * method it guards so that a pipe's error is told from the handler's own (`call-marks.ts`).
 *
 * A handler that writes the response itself (`@Res()` or `@Next()` without `passthrough: true`) cannot be replayed
 * and is refused here, when the class is defined.
 */
export function Idempotent(options: IdempotentOptions = {}): ClassDecorator & MethodDecorator {
  const interceptor = idempotencyInterceptorFor(options.dataSource);
  const apply = applyDecorators(SetMetadata(IDEMPOTENT_OPTIONS, options), UseFilters(IdempotencyProblemFilter));
  return ((target: object, propertyKey?: string | symbol, descriptor?: PropertyDescriptor) => {
    if (propertyKey !== undefined) {
      refuseOwnResponse(target.constructor, propertyKey);
      recordIdempotentRoute(target.constructor, propertyKey); // for the OpenAPI document (openapi-contract.ts)
      if (typeof descriptor?.value === 'function') {
        descriptor.value = markedOnce(descriptor.value);
        // Installed here too, not only through the returned descriptor: a decorator applied by hand (plain
        // JavaScript: `Idempotent()(proto, 'create', descriptor)`) has its return value ignored.
        Object.defineProperty(target, propertyKey, descriptor);
        interceptFirst(descriptor.value, interceptor);
      }
      return (apply as MethodDecorator)(target, propertyKey, descriptor!);
    }
    const prototype = (target as Function).prototype;
    recordIdempotentRoute(target as Function);
    for (const name of Object.getOwnPropertyNames(prototype)) {
      if (name === 'constructor') continue;
      refuseOwnResponse(target as Function, name);
      refuseOtherDataSource(target as Function, name, options.dataSource);
      markMethodStart(prototype, name);
    }
    interceptFirst(target as Function, interceptor);
    return (apply as ClassDecorator)(target as Function);
  }) as ClassDecorator & MethodDecorator;
}

/**
 * Puts `interceptor` first among the interceptors of `target` (a method or a class). Decorators apply from the
 * bottom up and `UseInterceptors` appends: an app's interceptor declared below `@Idempotent()` is already there and
 * goes after it, one declared above is appended after it later. Either way the key is claimed before they run.
 */
function interceptFirst(target: object, interceptor: Function): void {
  const interceptors: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, target) ?? [];
  Reflect.defineMetadata(INTERCEPTORS_METADATA, [interceptor, ...interceptors], target);
}

/** Wraps a method of `prototype` so that it marks its start (see `call-marks.ts`), once. */
function markMethodStart(prototype: any, name: string): void {
  const descriptor = Object.getOwnPropertyDescriptor(prototype, name);
  if (typeof descriptor?.value !== 'function') return;
  Object.defineProperty(prototype, name, { ...descriptor, value: markedOnce(descriptor.value) });
}

/** `method` wrapped by `markingStart`, unless it already is (a method decorated and in a decorated class). */
function markedOnce<F extends (...args: any[]) => unknown>(method: F): F {
  if (MARKED.has(method)) return method;
  const marked = markingStart(method);
  MARKED.add(marked);
  return marked;
}

const MARKED = new WeakSet<Function>();

/** A method's `@Idempotent({ dataSource })` naming another outbox than its class's would be guarded by the class's. */
function refuseOtherDataSource(controller: Function, method: string, dataSource: string | undefined): void {
  const handler = (controller.prototype as Record<string, unknown>)[method];
  if (typeof handler !== 'function') return;
  const own: IdempotentOptions | undefined = Reflect.getMetadata(IDEMPOTENT_OPTIONS, handler);
  if (!own || own.dataSource === undefined || sameDataSource(own.dataSource, dataSource)) return;
  throw new OutboxConfigurationError(
    `@Idempotent() on ${controller.name} records keys in the outbox of DataSource '${dataSource ?? 'default'}', but ` +
      `its method ${method} asks for '${own.dataSource}'; the controller's interceptor runs first and would record it. ` +
      `Put @Idempotent({ dataSource }) on the methods only, or give the class and the method the same dataSource.`,
  );
}

function sameDataSource(a: string | undefined, b: string | undefined): boolean {
  return (a ?? 'default') === (b ?? 'default');
}

function refuseOwnResponse(controller: Function, method: string | symbol): void {
  const args: Record<string, unknown> = Reflect.getMetadata(ROUTE_ARGS_METADATA, controller, method) ?? {};
  const passthrough = Reflect.getMetadata(RESPONSE_PASSTHROUGH_METADATA, controller, method) === true;
  for (const slot of Object.keys(args)) {
    const type = Number(slot.split(':')[0]);
    if ((type === RouteParamtypes.RESPONSE && !passthrough) || type === RouteParamtypes.NEXT) {
      throw new OutboxConfigurationError(
        `@Idempotent() cannot guard ${controller.name}.${String(method)}: it takes @Res()/@Next() and writes the response itself, ` +
          'so the response can be neither stored nor replayed. Return the body instead (use @Res({ passthrough: true }) to set headers or cookies), ' +
          'or remove @Idempotent() from this handler.',
      );
    }
  }
}

/** The interceptor's subclass per DataSource name. */
const interceptors = new Map<string, Type<IdempotencyInterceptor>>();

/**
 * The interceptor of `@Idempotent({ dataSource })`: `IdempotencyInterceptor` itself for the default DataSource, else a
 * subclass (one per name) that is given the named outbox's `IdempotencyService` (`getOutboxToken(IdempotencyService,
 * name)`) in place of the default one. Everything else is inherited.
 */
export function idempotencyInterceptorFor(dataSource: string | undefined): Type<IdempotencyInterceptor> {
  if (isDefaultDataSource(dataSource)) return IdempotencyInterceptor;
  const name = dataSource!;
  let interceptor = interceptors.get(name);
  if (!interceptor) {
    // The subclass inherits the constructor and its parameter types; only the IdempotencyService slot is redirected.
    const tokens = new Map([[IdempotencyService, getOutboxToken(IdempotencyService, name)]]);
    interceptor = withInjectedTokens(IdempotencyInterceptor, tokens, `IdempotencyInterceptor(${name})`);
    Injectable()(interceptor);
    interceptors.set(name, interceptor);
  }
  return interceptor;
}
