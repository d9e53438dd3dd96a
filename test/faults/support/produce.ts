import type { OutboxService } from '../../../src';
import { TestOrder } from '../../fixtures/order.entity';

export interface ProduceOptions {
  /** Orders to write; each gets one `OrderPlaced` event in the same transaction. */
  total: number;
  /** Transactions running at once. */
  concurrency?: number;
  /** Pause after each transaction of a worker (ms), to spread the writes over time. */
  pauseMs?: number;
  /** Prefix of the order references. */
  prefix?: string;
  /** Called with the number of orders committed so far. */
  onProgress?: (committed: number) => void;
}

/** Writes orders with their events through `OutboxService.transaction()`; resolves with the message ids. */
export async function produceOrders(outbox: OutboxService, options: ProduceOptions): Promise<string[]> {
  const { total, concurrency = 4, pauseMs = 0, prefix = 'order' } = options;
  const ids: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < total) {
      const n = next++;
      const reference = `${prefix}-${n}`;
      ids.push(
        await outbox.transaction(async (manager) => {
          const order = await manager.save(TestOrder, { reference, amount: 1 });
          return outbox.emit('OrderPlaced', { orderId: order.id, reference }, { key: `customer-${n % 50}` });
        }),
      );
      options.onProgress?.(ids.length);
      if (pauseMs > 0) await sleep(pauseMs);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return ids;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A random integer in [min, max]. */
export const randomBetween = (min: number, max: number) => min + Math.floor(Math.random() * (max - min + 1));
