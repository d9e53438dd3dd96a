import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { OutboxConfigurationError } from '../errors';
import { isDefaultDataSource, OUTBOX_DATA_SOURCE_NAME } from '../outbox.constants';
import type { OutboxEventContext } from './outbox-event-context';
import { OUTBOX_EVENT_HANDLER_METADATA, OutboxEventHandlerMetadata } from './on-outbox-event.decorator';

/** One discovered `@OnOutboxEvent()` handler, bound to its provider instance. */
export interface OutboxEventHandler {
  readonly pattern: string;
  /** Unique name; the scope of its deduplication records is `outbox-handler:<name>`. */
  readonly name: string;
  invoke(payload: unknown, context: OutboxEventContext): Promise<unknown>;
}

/**
 * The `@OnOutboxEvent()` handlers of the app, found once when the module initializes (on singleton providers;
 * a request- or transient-scoped one is refused, as it has no instance to run outside a request).
 */
@Injectable()
export class OutboxHandlerRegistry implements OnModuleInit {
  private readonly byPattern = new Map<string, OutboxEventHandler[]>();
  private found = false;

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    @Inject(OUTBOX_DATA_SOURCE_NAME) private readonly dataSourceName: string,
  ) {}

  /** True when a handler bound to `dataSource` (undefined: the default) belongs to this registry's outbox. */
  private isMine(dataSource: string | undefined): boolean {
    const mine = this.dataSourceName;
    return isDefaultDataSource(dataSource) ? isDefaultDataSource(mine) : dataSource === mine;
  }

  onModuleInit(): void {
    this.discover();
  }

  /** Handlers of `pattern`, in discovery order (empty when none). */
  handlersOf(pattern: string): readonly OutboxEventHandler[] {
    this.discover();
    return this.byPattern.get(pattern) ?? [];
  }

  /** Number of handlers of all patterns. */
  get size(): number {
    this.discover();
    let count = 0;
    for (const list of this.byPattern.values()) count += list.length;
    return count;
  }

  private discover(): void {
    if (this.found) return;
    this.found = true;
    const names = new Set<string>();
    for (const wrapper of this.discovery.getProviders()) {
      const { instance, metatype } = wrapper;
      if (!instance || typeof instance !== 'object' || !metatype) continue;
      const prototype = Object.getPrototypeOf(instance);
      for (const method of this.scanner.getAllMethodNames(prototype)) {
        const registrations: OutboxEventHandlerMetadata[] | undefined = Reflect.getMetadata(
          OUTBOX_EVENT_HANDLER_METADATA,
          prototype[method],
        );
        if (!registrations) continue;
        const className = (metatype as { name?: string }).name || 'Anonymous';
        if (!wrapper.isDependencyTreeStatic()) {
          throw new OutboxConfigurationError(
            `@OnOutboxEvent() on ${className}.${method}: the provider is request- or transient-scoped, so there is no ` +
              'instance to run it from the outbox. Make it a singleton (the default scope).',
          );
        }
        for (const { pattern, name = `${className}.${method}`, dataSource } of registrations) {
          if (!this.isMine(dataSource)) continue;
          const unique = `${name}\u0000${pattern}`;
          if (names.has(unique)) {
            throw new OutboxConfigurationError(
              `Two @OnOutboxEvent('${pattern}') handlers are named '${name}' (the name keys their deduplication ` +
                `records). Give one a name of its own: @OnOutboxEvent('${pattern}', { name: '…' }).`,
            );
          }
          names.add(unique);
          const handler: OutboxEventHandler = {
            pattern,
            name,
            invoke: async (payload, context) => prototype[method].call(instance, payload, context),
          };
          const list = this.byPattern.get(pattern);
          if (list) list.push(handler);
          else this.byPattern.set(pattern, [handler]);
        }
      }
    }
  }
}
