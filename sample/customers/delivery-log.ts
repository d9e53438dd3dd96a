import { Injectable } from '@nestjs/common';

export type DeliveryOutcome = 'applied' | 'skipped: already applied' | 'failed';

/** How a delivery's handler ended: it applied the message, or threw (rolled back, then stored for retry). */
type HandlerEnd = { applied: true } | { applied: false; error: string };

/** One delivery of an event to the consumer, as the consumer saw it. */
export interface Delivery {
  messageId: string | null;
  pattern: string;
  payload: unknown;
  outcome: DeliveryOutcome;
  error?: string;
  at: string;
}

/**
 * The last deliveries the in-process consumer received, in memory, newest last — so `GET /deliveries` (and
 * `npm run sample:demo`) can show a redelivered event being skipped. Not needed to use the library.
 */
@Injectable()
export class DeliveryLog {
  private static readonly KEEP = 200;
  private readonly deliveries: Delivery[] = [];
  /** How the handler of each delivery ended, by transport context (set by the handler, read by the interceptor). */
  private readonly ends = new WeakMap<object, HandlerEnd>();

  markApplied(context: object): void {
    this.ends.set(context, { applied: true });
  }

  /** The handler threw: with `@Idempotent({ retry })` the delivery still completes (the message is stored). */
  markFailed(context: object, error: unknown): void {
    this.ends.set(context, { applied: false, error: String((error as Error)?.message ?? error) });
  }

  /** How the handler ended, or undefined when it did not run (an already applied message, skipped). */
  endOf(context: object): HandlerEnd | undefined {
    return this.ends.get(context);
  }

  record(delivery: Omit<Delivery, 'at'>): void {
    this.deliveries.push({ ...delivery, at: new Date().toISOString() });
    if (this.deliveries.length > DeliveryLog.KEEP) this.deliveries.splice(0, this.deliveries.length - DeliveryLog.KEEP);
  }

  list(messageId?: string): Delivery[] {
    return messageId ? this.deliveries.filter((d) => d.messageId === messageId) : [...this.deliveries];
  }
}
