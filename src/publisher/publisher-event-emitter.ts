import type { LoggerService } from '@nestjs/common';
import type { EventEmitter } from 'node:events';
import { hasChannelSubscribers, publishToChannel } from '../events/outbox-channels';
import type { OutboxPublisherEvents } from '../events/publisher-events';
import { describeError } from '../util/describe-error';

/**
 * Sends the publisher's events (`OutboxPublisherEvents`): each one goes to the listeners of `listeners` (those
 * added with `publisher.on()`) and to its `node:diagnostics_channel` channel (`OUTBOX_CHANNELS`). A listener that
 * throws is logged, never thrown into the relay.
 */
export class PublisherEventEmitter {
  constructor(
    private readonly listeners: EventEmitter,
    private readonly logger: LoggerService,
  ) {
    listeners.on('error', (error) => this.logger.error(`An outbox event listener failed: ${describeError(error)}`));
  }

  /** Sends `payload` to the diagnostics channel and the listeners of `event`. */
  send<E extends keyof OutboxPublisherEvents>(event: E, payload: OutboxPublisherEvents[E]): void {
    try {
      publishToChannel(event, payload);
      this.listeners.emit(event, payload);
    } catch (error) {
      this.logger.error(`A '${event}' listener threw: ${describeError(error)}`);
    }
  }

  /** True when `event` has a listener or a channel subscriber, so building its payload is worth it. */
  isWatched(event: keyof OutboxPublisherEvents): boolean {
    return this.listeners.listenerCount(event) > 0 || hasChannelSubscribers(event);
  }
}
