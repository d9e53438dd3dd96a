import type { Meter } from '@opentelemetry/api';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { OUTBOX_IDEMPOTENCY_CHANNEL, OutboxIdempotencyEvent } from '../events/idempotency-channel';
import { OUTBOX_METRICS } from './metric-names';

/** One subscription per meter, shared by the `OutboxModule` imports that use it (the channel is process-wide). */
const subscriptions = new Map<Meter, { users: number; stop: () => void }>();

/**
 * Counts `@Idempotent()` outcomes (`outbox.idempotency.requests`, by `outbox.idempotency.outcome`,
 * `outbox.idempotency.consumer`, `outbox.idempotency.kind` and `outbox.data_source`, the DataSource the key was
 * recorded in) from the `nestjs-outbox:idempotency` diagnostics
 * channel. The interceptors of every module publish on that one channel, so each meter subscribes once however many
 * modules share it. Returns the release of this user's share.
 */
export function countIdempotencyOutcomes(meter: Meter): () => void {
  let entry = subscriptions.get(meter);
  if (!entry) {
    const requests = meter.createCounter(OUTBOX_METRICS.idempotency, {
      unit: '{request}',
      description: 'Requests and messages handled by @Idempotent(), by outcome',
    });
    const listener = (message: unknown) => {
      const { outcome, consumer, kind, dataSource } = message as OutboxIdempotencyEvent;
      requests.add(1, {
        'outbox.idempotency.outcome': outcome,
        'outbox.idempotency.consumer': consumer,
        'outbox.idempotency.kind': kind,
        'outbox.data_source': dataSource,
      });
    };
    subscribe(OUTBOX_IDEMPOTENCY_CHANNEL, listener);
    entry = { users: 0, stop: () => unsubscribe(OUTBOX_IDEMPOTENCY_CHANNEL, listener) };
    subscriptions.set(meter, entry);
  }
  entry.users++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--entry!.users === 0) {
      entry!.stop();
      subscriptions.delete(meter);
    }
  };
}
