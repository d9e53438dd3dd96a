import type { LoggerService } from '@nestjs/common';
import type { EventEmitter } from 'node:events';
import { hasChannelSubscribers, publishToChannel } from '../events/outbox-channels';
import type { OutboxEventPayload, OutboxPublisherEvents } from '../events/publisher-events';
import { describeError } from '../util/describe-error';

/**
 * Sends the publisher's events (`OutboxPublisherEvents`): each one goes to the listeners of `listeners` (those
 * added with `publisher.on()`) and to its `node:diagnostics_channel` channel (`OUTBOX_CHANNELS`), stamped with the
 * outbox's `dataSource` — the channels are shared by every outbox of the process. A listener that throws is logged,
 * never thrown into the relay.
 */
export class PublisherEventEmitter {
  constructor(
    private readonly listeners: EventEmitter,
    private readonly logger: LoggerService,
    /** The outbox's DataSource name, set on every event (`'default'` for the default one). */
    private readonly dataSource: string,
  ) {
    listeners.on('error', (error) => this.logger.error(`An outbox event listener failed: ${describeError(error)}`));
  }

  /**
   * Sends `payload`, with the outbox's `dataSource`, to the diagnostics channel and the listeners of `event`; when
   * nothing watches `event`, does nothing (not even the copy that stamps the payload).
   */
  send<E extends keyof OutboxPublisherEvents>(event: E, payload: OutboxEventPayload<E>): void {
    if (!this.isWatched(event)) return;
    try {
      const stamped = { ...payload, dataSource: this.dataSource } as OutboxPublisherEvents[E];
      publishToChannel(event, stamped);
      this.listeners.emit(event, stamped);
    } catch (error) {
      this.logger.error(`A '${event}' listener threw: ${describeError(error)}`);
    }
  }

  /** True when `event` has a listener or a channel subscriber, so building its payload is worth it. */
  isWatched(event: keyof OutboxPublisherEvents): boolean {
    return this.listeners.listenerCount(event) > 0 || hasChannelSubscribers(event);
  }
}
