import { channel, Channel } from 'node:diagnostics_channel';
import type { OutboxPublisherEvents } from './publisher-events';

/**
 * The publisher's events on `node:diagnostics_channel`, for metrics, logs and APM agents that subscribe without
 * touching Nest's DI. Nothing is built or sent while a channel has no subscriber.
 *
 * ```ts
 * import { subscribe } from 'node:diagnostics_channel';
 * import { OUTBOX_CHANNELS } from 'nestjs-outbox';
 * subscribe(OUTBOX_CHANNELS.dead, (event) => alert(event)); // OutboxDeadEvent
 * ```
 */
export const OUTBOX_CHANNELS = Object.freeze({
  /** A batch was confirmed by the broker: `OutboxPublishedEvent`. */
  published: 'nestjs-outbox:published',
  /** A failed attempt was rescheduled with backoff: `OutboxRetryEvent`. */
  retry: 'nestjs-outbox:retry-scheduled',
  /** A message exhausted its attempts or failed for good: `OutboxDeadEvent`. */
  dead: 'nestjs-outbox:dead-lettered',
  /** A publisher lost the claim of rows before it could mark them: `OutboxLeaseLostEvent`. */
  leaseLost: 'nestjs-outbox:lease-lost',
  /** Dead messages were requeued with `OutboxDeadLetters.requeue()`: `OutboxRequeuedEvent`. */
  requeued: 'nestjs-outbox:requeued',
  /** An expired message was made a dead letter or dropped instead of being published: `OutboxExpiredEvent`. */
  expired: 'nestjs-outbox:expired',
} satisfies Record<keyof OutboxPublisherEvents, string>);

const channels: Record<keyof OutboxPublisherEvents, Channel> = {
  published: channel(OUTBOX_CHANNELS.published),
  retry: channel(OUTBOX_CHANNELS.retry),
  dead: channel(OUTBOX_CHANNELS.dead),
  leaseLost: channel(OUTBOX_CHANNELS.leaseLost),
  requeued: channel(OUTBOX_CHANNELS.requeued),
  expired: channel(OUTBOX_CHANNELS.expired),
};

/** True when the event's channel has a subscriber (so building its payload is worth it). */
export function hasChannelSubscribers(event: keyof OutboxPublisherEvents): boolean {
  return channels[event].hasSubscribers;
}

/** Publishes `payload` on the event's channel, if anyone listens. */
export function publishToChannel<E extends keyof OutboxPublisherEvents>(
  event: E,
  payload: OutboxPublisherEvents[E],
): void {
  const target = channels[event];
  if (target.hasSubscribers) target.publish(payload);
}
