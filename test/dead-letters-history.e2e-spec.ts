import { RmqRecordSerializer } from '@nestjs/microservices/serializers/rmq-record.serializer';
import { OutboxDeadLetters, OutboxMessage, OutboxPublisher } from '../src';
import { OutboxDeadLetterQueryError } from '../src/errors';
import { OutboxDeadEvent } from '../src/events/publisher-events';
import { OutboxAttempt } from '../src/schema/outbox-attempt.entity';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { rmqClientOptions, uniqueQueue } from './helpers/consumers';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

const SECRET = 's3cret-Pa55';

/** Fails every message whose payload says `poison`, with an error that carries credentials. */
class PoisonSerializer extends RmqRecordSerializer {
  serialize(packet: any): any {
    const data = packet?.data?.data ?? packet?.data;
    if (data?.poison) throw new Error(`cannot encode for amqp://app:${SECRET}@rabbit:5672 (password=${SECRET})`);
    return super.serialize(packet);
  }
}

const kinds: DatabaseKind[] = ['postgres', 'mariadb', 'sqlite'];

for (const kind of kinds) {
  const label = DATABASE_LABEL[kind];
  describeWith([...servicesOf(kind), 'rabbitmq'], `Attempt history and dead-letter queries on ${label}`, () => {
    const queue = uniqueQueue('outbox-history');
    let recorder: AmqpRecorder;
    const dead: OutboxDeadEvent[] = [];
    const fx = useOutboxApp(kind, async (f) => {
      recorder = await new AmqpRecorder(queue).start();
      f.defer(() => recorder.stop());
      return {
        client: rmqClientOptions(queue, undefined, { serializer: new PoisonSerializer() }),
        outbox: {
          publisher: { pollingInterval: 50, instanceId: 'test-host:4242' },
          retry: { maxAttempts: 5, initialDelay: 10, maxDelay: 20, historyLimit: 3 },
        },
      };
    });
    const deadLetters = () => fx.app.get(OutboxDeadLetters);
    const messages = () => fx.dataSource.getRepository(OutboxMessage);
    const attempts = () => fx.dataSource.getRepository(OutboxAttempt);
    let seeded = 0;

    beforeAll(() => {
      fx.app.get(OutboxPublisher).on('dead', (event) => dead.push(event));
    });

    /** Writes dead rows directly (as a publisher would have left them), dead at the given times. */
    async function seedDead(rows: Array<{ pattern?: string; key?: string | null; deadAt: number; error?: string }>) {
      const ids: string[] = [];
      for (const r of rows) {
        const messageId = `seed-${kind}-${++seeded}`;
        ids.push(messageId);
        await messages().insert({
          messageId,
          pattern: r.pattern ?? 'Seeded',
          payload: '{}',
          headers: null,
          key: r.key ?? null,
          status: 'dead',
          attempts: 5,
          availableAt: new Date(r.deadAt),
          createdAt: new Date(r.deadAt - 1000),
          deadAt: new Date(r.deadAt),
          lastError: r.error ?? 'seeded failure',
        });
      }
      return ids;
    }

    it(`${label}: a message failing 5 times keeps its last 3 attempts, redacted, with owner and publisher`, async () => {
      const id = await fx.outbox.transaction(() =>
        fx.outbox.emit('History', { poison: true }, { key: 'h-1', headers: { tenant: 't1' } }),
      );
      await waitFor(() => dead.some((e) => e.messageId === id), 'the poison message to go dead');
      const detail = (await deadLetters().get(id))!;
      expect(detail).toMatchObject({
        messageId: id,
        pattern: 'History',
        key: 'h-1',
        status: 'dead',
        attempts: 5,
        payload: JSON.stringify({ poison: true }),
        headers: JSON.stringify({ tenant: 't1' }),
      });
      expect(detail.deadAt).toBeGreaterThanOrEqual(detail.createdAt);
      expect(detail.history.map((a) => [a.attempt, a.counted])).toEqual([
        [3, true],
        [4, true],
        [5, true],
      ]);
      for (const attempt of detail.history) {
        expect(attempt.error).toContain('cannot encode for amqp://***@rabbit:5672');
        expect(attempt.publisher).toBe('test-host:4242');
        expect(attempt.owner).toMatch(/^[0-9a-f-]{36}$/);
        expect(attempt.failedAt).toBeGreaterThanOrEqual(detail.createdAt);
      }
      expect(new Set(detail.history.map((a) => a.owner)).size).toBe(3);
      expect(JSON.stringify(detail)).not.toContain(SECRET);
      const stored = await attempts().find();
      expect(stored.some((a) => a.error.includes(SECRET))).toBe(false);
      expect(await deadLetters().get('no-such-message')).toBeNull();
      await expect(deadLetters().get('' as never)).rejects.toBeInstanceOf(OutboxDeadLetterQueryError);

      const page = await deadLetters().page({ pattern: 'History' });
      expect(page).toEqual({
        items: [expect.objectContaining({ messageId: id, deadAt: detail.deadAt })],
        nextCursor: null,
      });
      expect(page.items[0].lastError).not.toContain(SECRET);

      expect(await deadLetters().purge({ pattern: 'History' })).toBe(1);
      expect(await deadLetters().get(id)).toBeNull();
      expect(await attempts().count()).toBe(0);
    });

    it(`${label}: page() walks every dead row exactly once, newest first, while rows die and are written`, async () => {
      await deadLetters().purge();
      const times = [5000, 5000, 5000, 4000, 4000, 3000, 2000, 2000, 2000, 2000, 1000, 1000, 900];
      const original = await seedDead(times.map((deadAt) => ({ deadAt, pattern: 'Walk' })));
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page = await deadLetters().page({ pattern: 'Walk', limit: 4, cursor });
        seen.push(...page.items.map((i) => i.messageId));
        cursor = page.nextCursor;
        pages++;
        // Meanwhile: a newer death, an older-timestamped one written later, and a pending row of the same pattern.
        await seedDead([{ deadAt: Date.now(), pattern: 'Walk' }]);
        await fx.outbox.transaction(() => fx.outbox.emit('Walk', { n: pages }, { delay: 3_600_000 }));
      } while (cursor !== null);
      const expectedOrder = original
        .map((id, i) => ({ id, deadAt: times[i], i }))
        .sort((a, b) => b.deadAt - a.deadAt || b.i - a.i)
        .map((r) => r.id);
      expect(seen.filter((id) => original.includes(id))).toEqual(expectedOrder);
      expect(new Set(seen).size).toBe(seen.length);
      expect(pages).toBe(4);
    });

    it(`${label}: each filter narrows pages and counts; bad filters and cursors are refused`, async () => {
      await deadLetters().purge();
      const [a, b, c] = await seedDead([
        { deadAt: 10_000, pattern: 'Order', key: 'k1', error: 'Broker TIMEOUT after 10s' },
        { deadAt: 20_000, pattern: 'Order', key: 'k2', error: 'nack' },
        { deadAt: 30_000, pattern: 'Invoice', key: 'k1', error: 'timeout' },
      ]);
      const ids = async (filter: object) => {
        const { items } = await deadLetters().page(filter);
        expect(await deadLetters().count(filter)).toBe(items.length);
        return items.map((i) => i.messageId);
      };
      expect(await ids({})).toEqual([c, b, a]);
      expect(await ids({ pattern: 'Order' })).toEqual([b, a]);
      expect(await ids({ key: 'k1' })).toEqual([c, a]);
      expect(await ids({ errorContains: 'timeout' })).toEqual([c, a]);
      expect(await ids({ deadSince: 20_000 })).toEqual([c, b]);
      expect(await ids({ deadBefore: new Date(20_000) })).toEqual([a]);
      expect(await ids({ deadSince: '1970-01-01T00:00:15Z', deadBefore: '25000' })).toEqual([b]);
      expect(await ids({ createdSince: 19_000, createdBefore: 29_000 })).toEqual([b]);
      expect(await ids({ messageIds: [a, c] })).toEqual([c, a]);

      const refused = [
        () => deadLetters().page({ patern: 'Order' } as never),
        () => deadLetters().page({ deadSince: 'yesterday' }),
        () => deadLetters().page({ limit: 0 }),
        () => deadLetters().page({ cursor: 'not-a-cursor' }),
        () => deadLetters().requeue({ patern: 'Order' } as never),
        () => deadLetters().purge({ key: '' }),
        () => deadLetters().count({ messageIds: 'x' } as never),
      ];
      for (const call of refused) await expect(call()).rejects.toBeInstanceOf(OutboxDeadLetterQueryError);
      expect(await deadLetters().count()).toBe(3);
    });

    it(`${label}: requeue and purge by filter touch exactly the matching dead rows`, async () => {
      await deadLetters().purge();
      const [match1, other, match2] = await seedDead([
        { deadAt: 1000, pattern: 'Requeue', error: 'boom' },
        { deadAt: 2000, pattern: 'Requeue', error: 'other' },
        { deadAt: 3000, pattern: 'Requeue', error: 'BOOM again' },
      ]);
      const [keep] = await seedDead([{ deadAt: 4000, pattern: 'Keep', error: 'boom' }]);
      const pending = await fx.outbox.transaction(() =>
        fx.outbox.emit('Requeue', { wait: true }, { delay: 3_600_000 }),
      );

      expect(await deadLetters().requeue({ pattern: 'Requeue', errorContains: 'boom' })).toBe(2);
      await waitFor(
        () => [match1, match2].every((id) => recorder.messages.some((m) => m.messageId === id)),
        'the requeued messages to be published',
      );
      const status = async (id: string) => (await messages().findOneByOrFail({ messageId: id })).status;
      expect(await status(other)).toBe('dead');
      expect(await status(keep)).toBe('dead');
      const waiting = await messages().findOneByOrFail({ messageId: pending });
      expect(waiting).toMatchObject({ status: 'pending', attempts: 0 });
      expect(recorder.messages.some((m) => [other, keep, pending].includes(m.messageId))).toBe(false);

      expect(await deadLetters().requeue({ pattern: 'Requeue', errorContains: 'boom' })).toBe(0);
      expect(await deadLetters().purge({ pattern: 'Keep' })).toBe(1);
      expect(await deadLetters().purge([other])).toBe(1);
      expect(await status(pending)).toBe('pending');
      expect(await deadLetters().count()).toBe(0);
    });
  });
}
