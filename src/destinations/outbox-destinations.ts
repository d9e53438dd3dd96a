import { Inject, Injectable, Optional } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type { NewOutboxRow } from '../dialects/outbox-dialect';
import { OutboxConfigurationError, OutboxRouteError } from '../errors';
import { type OutboxEventHandler, OutboxHandlerRegistry } from '../handlers/outbox-handler-registry';
import { OUTBOX_OPTIONS } from '../outbox.constants';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { BrokerDestination, BrokerDestinations } from './broker-destinations';
import { ALL_DESTINATIONS, brokerDestination, handlerDestination } from './destination-names';

/** The destinations of a message written as one row for every destination. */
const EVERY_DESTINATION: readonly string[] = Object.freeze([ALL_DESTINATIONS]);

/**
 * Where the messages of one outbox go: its brokers (none, the `client`, or the `route.clients`) and its
 * `@OnOutboxEvent()` handlers. `emit()` reads it to write a row per destination; the publisher, to deliver each row.
 */
@Injectable()
export class OutboxDestinations {
  readonly brokers: BrokerDestinations;

  constructor(
    @Inject(OUTBOX_OPTIONS) private readonly options: ResolvedOutboxOptions,
    moduleRef: ModuleRef,
    @Optional() private readonly handlers?: OutboxHandlerRegistry,
  ) {
    this.brokers = new BrokerDestinations(moduleRef, options);
  }

  /** The `@OnOutboxEvent()` handlers of `pattern` (none without handlers). */
  handlersOf(pattern: string): readonly OutboxEventHandler[] {
    return this.handlers?.handlersOf(pattern) ?? [];
  }

  /**
   * The destinations a message is written to, one row each (see `destination-names.ts`): the broker
   * `route.select()` returns (or the `client`) and each `@OnOutboxEvent()` handler of its pattern. One row for every
   * destination (`['']`, delivered as in earlier versions) when that is the same: the outbox has no `route` and the
   * message at most one destination. Also `['']` when `route.select()` fails here: it runs again at publish time,
   * where its error is retried and dead-lettered (never lost).
   */
  destinationsOf(message: Pick<NewOutboxRow, 'messageId' | 'pattern' | 'key' | 'headers'>): readonly string[] {
    const handlers = this.handlersOf(message.pattern);
    if (!this.options.route) {
      const broker = this.brokers.primary;
      if ((broker ? 1 : 0) + handlers.length <= 1) return EVERY_DESTINATION;
      const names = handlers.map((h) => handlerDestination(h.name));
      return broker ? [brokerDestination(broker.token), ...names] : names;
    }
    let broker: BrokerDestination | null;
    try {
      const { messageId, pattern, key } = message;
      const headers = message.headers ? (JSON.parse(message.headers) as Record<string, string>) : {};
      broker = this.brokers.select({ messageId, pattern, key, headers });
    } catch (error) {
      if (error instanceof OutboxRouteError) return EVERY_DESTINATION;
      throw error;
    }
    const names = handlers.map((h) => handlerDestination(h.name));
    if (broker) names.unshift(brokerDestination(broker.token));
    return names.length === 0 ? EVERY_DESTINATION : names;
  }

  /**
   * Fails when the outbox has nowhere to deliver: no `client`, no `route` and no `@OnOutboxEvent()` handler
   * (`OutboxConfigurationError` naming the fix).
   */
  checkConfigured(): void {
    if (this.brokers.configured || (this.handlers?.size ?? 0) > 0) return;
    throw new OutboxConfigurationError(
      'OutboxModule has nowhere to deliver messages: no `client`, no `route` and no @OnOutboxEvent() handler. ' +
        "Pass `client: <token of a ClientsModule client>` to forRoot() (e.g. ClientsModule.register([{ name: 'BROKER', " +
        "transport: Transport.RMQ, options }]) and `client: 'BROKER'`), add an @OnOutboxEvent() handler, or set " +
        '`publisher: { enabled: false }` in processes that do not publish.',
    );
  }
}
