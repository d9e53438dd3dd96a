import { OutboxHandlerInFlightError, OutboxNonRetryableError } from '../errors';
import { HandlerSlots } from '../handlers/handler-slots';
import { deliverToAll } from './deliver-to-all';

const ok = (kind: 'broker' | 'handler') => ({ kind, run: async () => 'done' });
const failing = (kind: 'broker' | 'handler', error: unknown) => ({
  kind,
  run: async () => {
    throw error;
  },
});

describe('deliverToAll()', () => {
  it('resolves when every destination succeeded', async () => {
    await expect(deliverToAll([ok('broker'), ok('handler'), ok('handler')])).resolves.toBeUndefined();
  });

  it("runs every destination even when one fails, and a handler's failure stands over the broker's", async () => {
    const ran: string[] = [];
    const broker = new Error('connect ECONNREFUSED');
    const handler = new Error('handler bug');
    const parts = [
      { kind: 'broker' as const, run: async () => (ran.push('broker'), Promise.reject(broker)) },
      { kind: 'handler' as const, run: async () => (ran.push('h1'), Promise.reject(handler)) },
      { kind: 'handler' as const, run: async () => ran.push('h2') },
    ];
    await expect(deliverToAll(parts)).rejects.toBe(handler);
    expect(ran).toEqual(['broker', 'h1', 'h2']);
  });

  it('a non-retryable failure stands over any other', async () => {
    const fatal = new OutboxNonRetryableError('never');
    await expect(deliverToAll([failing('handler', new Error('x')), failing('broker', fatal)])).rejects.toBe(fatal);
  });
});

it("a handler found running elsewhere decides only when nothing else failed (the broker's failure counts)", async () => {
  const busy = new OutboxHandlerInFlightError('busy');
  const broker = new Error('nacked');
  await expect(deliverToAll([failing('handler', busy), failing('broker', broker)])).rejects.toBe(broker);
  await expect(deliverToAll([failing('handler', busy), ok('broker')])).rejects.toBe(busy);
});

describe('HandlerSlots', () => {
  it('runs at most `limit` tasks at once and all of them in the end', async () => {
    const slots = new HandlerSlots(2);
    let running = 0;
    let peak = 0;
    const task = () =>
      slots.run(async () => {
        peak = Math.max(peak, ++running);
        await new Promise((r) => setImmediate(r));
        running--;
        return 1;
      });
    const results = await Promise.all(Array.from({ length: 7 }, task));
    expect(results).toEqual([1, 1, 1, 1, 1, 1, 1]);
    expect(peak).toBe(2);
  });
});
