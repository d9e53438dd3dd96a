import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OutboxMessage, OutboxPublisher, OutboxService } from '../src';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { rmqClientOptions, uniqueQueue } from './helpers/consumers';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

const TOTAL = 10_000;
const KEYS = 60;
const WRITERS = 12;

/**
 * Three publishers — three apps, each with its own DataSource and RabbitMQ client — drain one outbox while twelve
 * writers fill it: every message is published exactly once, and a real RabbitMQ consumer sees every key's
 * messages in the order their transactions committed.
 */
const kinds: DatabaseKind[] = ['postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `Three publishers, one outbox on ${DATABASE_LABEL[kind]} → RabbitMQ`,
    () => {
      const fx = useTestDatabase(kind);
      const apps: INestApplication[] = [];
      let recorder: AmqpRecorder;
      const queue = uniqueQueue('outbox-replicas');

      beforeAll(async () => {
        recorder = await new AmqpRecorder(queue).start();
        fx.defer(() => recorder.stop());
        // The writer only writes; three replicas publish (each app has its own DataSource and connection pool).
        for (let i = 0; i < 4; i++) {
          apps.push(
            await fx.start({
              client: rmqClientOptions(queue),
              outbox: { publisher: { enabled: i > 0, pollingInterval: 250 } },
              logger: ['error'],
            }),
          );
        }
      });

      it(`publishes ${TOTAL} messages exactly once, each key in commit order`, async () => {
        const writer = apps[0].get(OutboxService);
        const publishedBy = [0, 0, 0];
        apps
          .slice(1)
          .forEach((app, i) =>
            app.get(OutboxPublisher).on('published', (event) => (publishedBy[i] += event.messages.length)),
          );
        /** Per key, the message ids written. */
        const committed = new Map<string, string[]>();
        let next = 0;
        const write = async () => {
          while (next < TOTAL) {
            const keyed = next % 10 < 7;
            const key = keyed ? `k${Math.floor(Math.random() * KEYS)}` : undefined;
            const count = Math.min(TOTAL - next, 1 + Math.floor(Math.random() * 3));
            next += count;
            const ids = await writer.transaction(async () => {
              const out: string[] = [];
              for (let i = 0; i < count; i++) out.push(await writer.emit('Tick', { key: key ?? null, i }, { key }));
              return out;
            });
            if (key) {
              const list = committed.get(key) ?? [];
              list.push(...ids);
              committed.set(key, list);
            }
          }
        };
        await Promise.all(Array.from({ length: WRITERS }, write));

        await waitFor(() => recorder.distinct().size >= TOTAL, `${TOTAL} distinct messages at the consumer`, 90_000);
        const ds = apps[0].get(DataSource);
        await waitFor(
          async () => (await ds.getRepository(OutboxMessage).countBy({ status: 'sent' })) === TOTAL,
          'every row marked sent',
          30_000,
        );

        // Exactly once: no id twice, nothing missing.
        const counts = new Map<string, number>();
        for (const m of recorder.messages) counts.set(m.messageId, (counts.get(m.messageId) ?? 0) + 1);
        const duplicates = [...counts].filter(([, n]) => n > 1);
        expect(duplicates).toEqual([]);
        expect(counts.size).toBe(TOTAL);

        // Per-key order: the consumer's order of each key equals the commit order.
        const received = new Map<string, string[]>();
        for (const m of recorder.messages) {
          if (m.data.key === null) continue;
          const list = received.get(m.data.key) ?? [];
          list.push(m.messageId);
          received.set(m.data.key, list);
        }
        expect(received.size).toBe(committed.size);
        // Same-key writers are serialized at insert (see relay-order.e2e-spec), so a key's sequence order is its commit order.
        const bySeq = new Map<string, string[]>();
        const rows = await ds
          .getRepository(OutboxMessage)
          .find({ select: { seq: true, key: true, messageId: true }, order: { seq: 'ASC' } });
        for (const row of rows)
          if (row.key !== null) bySeq.set(row.key, [...(bySeq.get(row.key) ?? []), row.messageId]);
        for (const [key, ids] of bySeq) expect({ key, ids: received.get(key) }).toEqual({ key, ids });
        for (const [key, ids] of committed) expect(new Set(bySeq.get(key))).toEqual(new Set(ids));

        // All three replicas took part, and together they published each message once.
        expect(publishedBy.every((n) => n > 0)).toBe(true);
        expect(publishedBy.reduce((a, b) => a + b, 0)).toBe(TOTAL);

        // Nothing left claimed or retried.
        const leftovers = await ds
          .getRepository(OutboxMessage)
          .createQueryBuilder('m')
          .where('m.claimedBy IS NOT NULL OR m.attempts <> 1')
          .getCount();
        expect(leftovers).toBe(0);
      });
    },
  );
}
