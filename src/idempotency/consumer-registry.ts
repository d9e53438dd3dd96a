import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { DiscoveryService, ExternalContextCreator, MetadataScanner, Reflector } from '@nestjs/core';
import { PARAM_ARGS_METADATA, PATTERN_HANDLER_METADATA, PATTERN_METADATA } from '@nestjs/microservices/constants';
import { isDefaultDataSource, OUTBOX_OPTIONS } from '../outbox.constants';
import type { ResolvedOutboxOptions } from '../outbox.options';
import type { ResolvedConsumerRetry } from '../retry.options';
import type { OutboxRetryContext } from '../transports/outbox-retry.context';
import { HandlerOptionsResolver } from './handler-options';
import { IDEMPOTENT_OPTIONS, type IdempotentOptions } from './idempotency.options';
import { IdempotencyService } from './idempotency.service';

/** One `@EventPattern` consumer under `@Idempotent({ retry })` or `mode: 'accept-first'`, bound to its controller instance. */
export interface ConsumerHandler {
  /** `ControllerName.methodName`: its default records' scope and the name in its inbox rows' destination. */
  readonly name: string;
  /** The first pattern `@EventPattern()` declares (as text), stored as its inbox rows' pattern. */
  readonly pattern: string;
  readonly retry: ResolvedConsumerRetry;
  /** How long its records are kept (`ttl`). */
  readonly ttl: number;
  /** Calls the method as Nest would — param decorators and pipes — without guards, interceptors nor filters. */
  invoke(payload: unknown, context: OutboxRetryContext): Promise<unknown>;
}

const EVENT_HANDLER = 2; // PatternHandler.EVENT of @nestjs/microservices

/**
 * The values of a re-run's param decorators, as Nest's `RpcParamsFactory` gives them from `(data, context)`:
 * `@Payload(property?)` (RpcParamtype 3) and `@Ctx()` (6); anything else undefined.
 */
const RPC_PARAMS = {
  exchangeKeyForValue(type: number, property: unknown, args: unknown[]): unknown {
    if (type === 3) return typeof property === 'string' && property ? (args[0] as any)?.[property] : args[0];
    if (type === 6) return args[1];
    return undefined;
  },
};

/**
 * The broker consumers of the app whose failed messages become inbox rows (`@EventPattern` methods of controllers
 * under `@Idempotent({ retry })`, or a module-wide `idempotency.retry`, for this outbox's DataSource), found once on
 * first use. The relay runs their rows through `invoke()`.
 */
@Injectable()
export class ConsumerRegistry implements OnModuleInit {
  private readonly byName = new Map<string, ConsumerHandler>();
  private found = false;
  private readonly options: HandlerOptionsResolver;

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly contexts: ExternalContextCreator,
    private readonly idempotency: IdempotencyService,
    @Inject(OUTBOX_OPTIONS) private readonly outboxOptions: ResolvedOutboxOptions,
  ) {
    this.options = new HandlerOptionsResolver(
      reflector,
      () => idempotency.defaults,
      () => idempotency.dataSourceName,
    );
  }

  onModuleInit(): void {
    this.discover();
    if (this.byName.size === 0 || this.outboxOptions.publisher.enabled) return;
    new Logger('OutboxModule').warn(
      `${[...this.byName.keys()].join(', ')} run messages from inbox rows (failed ones under \`retry\`, all under ` +
        "`mode: 'accept-first'`), but this process's publisher is " +
        'disabled (publisher.enabled: false): the rows wait until a publisher runs in a process that hosts these ' +
        "consumers. Enable the publisher here, or leave `retry` (and `mode: 'accept-first'`) out.",
    );
  }

  /** The consumer named `name` (`ControllerName.methodName`), if it retries from inbox rows. */
  get(name: string): ConsumerHandler | undefined {
    this.discover();
    return this.byName.get(name);
  }

  /** Number of consumers that retry from inbox rows. */
  get size(): number {
    this.discover();
    return this.byName.size;
  }

  private isMine(dataSource: string | undefined): boolean {
    const mine = this.idempotency.dataSourceName;
    return isDefaultDataSource(dataSource) ? isDefaultDataSource(mine) : dataSource === mine;
  }

  private discover(): void {
    if (this.found) return;
    this.found = true;
    for (const wrapper of this.discovery.getControllers()) {
      const { instance, metatype } = wrapper;
      if (!instance || typeof instance !== 'object' || typeof metatype !== 'function') continue;
      const prototype = Object.getPrototypeOf(instance);
      for (const method of this.scanner.getAllMethodNames(prototype)) {
        const handler = prototype[method];
        if (this.reflector.get(PATTERN_HANDLER_METADATA, handler) !== EVENT_HANDLER) continue;
        const own = this.reflector.get<IdempotentOptions>(IDEMPOTENT_OPTIONS, handler);
        const ofClass = this.reflector.get<IdempotentOptions>(IDEMPOTENT_OPTIONS, metatype);
        if (!own && !ofClass) continue;
        if (!this.isMine(own?.dataSource ?? ofClass?.dataSource)) continue;
        const context = { getClass: () => metatype, getHandler: () => handler } as never;
        const resolved = this.options.resolve(context);
        if (!resolved.retry) continue;
        const patterns: unknown[] = this.reflector.get(PATTERN_METADATA, handler) ?? [];
        const first = patterns[0];
        const call = this.contexts.create(
          instance,
          handler,
          method,
          PARAM_ARGS_METADATA,
          RPC_PARAMS,
          undefined,
          undefined,
          { guards: false, interceptors: false, filters: false },
          'rpc',
        );
        this.byName.set(resolved.consumer, {
          name: resolved.consumer,
          pattern: typeof first === 'string' ? first : JSON.stringify(first ?? ''),
          retry: resolved.retry,
          ttl: resolved.ttl,
          invoke: (payload, ctx) => call(payload, ctx),
        });
      }
    }
  }
}
