import { Injectable } from '@nestjs/common';

export type DeliveryOutcome = 'applied' | 'skipped: already applied' | 'failed';

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
  /** Transport contexts of deliveries whose handler ran (set by the handler, read by the interceptor). */
  private readonly ran = new WeakSet<object>();

  markApplied(context: object): void {
    this.ran.add(context);
  }

  wasApplied(context: object): boolean {
    return this.ran.has(context);
  }

  record(delivery: Omit<Delivery, 'at'>): void {
    this.deliveries.push({ ...delivery, at: new Date().toISOString() });
    if (this.deliveries.length > DeliveryLog.KEEP) this.deliveries.splice(0, this.deliveries.length - DeliveryLog.KEEP);
  }

  list(messageId?: string): Delivery[] {
    return messageId ? this.deliveries.filter((d) => d.messageId === messageId) : [...this.deliveries];
  }
}
