import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OutboxDeadLetters, OutboxMessage, OutboxService } from '../../src';
import { createOutboxTestingModule } from '../fixtures/outbox-app';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from '../helpers/databases';
import { waitFor } from '../helpers/ports';
import { describeWith } from '../helpers/services';
import { PoisonAwareClientRMQ, poisonSwitch } from './support/poison-client';
import { sleep } from './support/produce';
import { deleteQueues, RABBITMQ_URL, uniqueQueue } from './support/rabbitmq';
import { RecordingConsumer } from './support/recording-consumer';
import { recordFaultRun } from './support/report';

const SCENARIO = '7 poison message';
const MAX_ATTEMPTS = 4;
const OTHERS = 300;

for (const kind of ['postgres', 'mariadb'] as DatabaseKind[]) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `Fault ${SCENARIO}: a publish that always fails goes dead while other keys flow, on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let consumer: RecordingConsumer;
      const queue = uniqueQueue(`poison-${kind}`);

      beforeAll(async () => {
        poisonSwitch.on = true;
        poisonSwitch.refused = 0;
        db = await createTestDatabase(kind);
        consumer = await new RecordingConsumer(queue).start();
        const moduleRef = await createOutboxTestingModule({
          db,
          client: {
            customClass: PoisonAwareClientRMQ,
            options: { urls: [RABBITMQ_URL], queue, queueOptions: { durable: true } },
          } as any,
          outbox: {
            transport: 'rmq',
            publisher: { pollingInterval: 100, publishTimeout: 2_000, leaseDuration: 4_000 },
            retry: { maxAttempts: MAX_ATTEMPTS, initialDelay: 50, maxDelay: 200 },
          },
        });
        app = moduleRef.createNestApplication({ logger: false });
        await app.init();
      });

      afterAll(async () => {
        poisonSwitch.on = true;
        await app?.close();
        await consumer?.stop();
        await db?.drop();
        await deleteQueues(queue);
      });

      it('dead after the cap, others keep flowing, its own key waits; after the fix requeue publishes it once, in key order', async () => {
        const outbox = app.get(OutboxService);
        const deadLetters = app.get(OutboxDeadLetters);
        const ds = app.get(DataSource);
        const poisonId = await outbox.transaction(() =>
          outbox.emit('OrderPlaced', { poison: true, n: 'poison' }, { key: 'customer-poison' }),
        );
        const followerId = await outbox.transaction(() =>
          outbox.emit('OrderPlaced', { n: 'after poison' }, { key: 'customer-poison' }),
        );
        const others: string[] = [];
        for (let i = 0; i < OTHERS; i++) {
          others.push(
            await outbox.transaction(() =>
              outbox.emit('OrderPlaced', { n: i }, i % 3 === 0 ? {} : { key: `customer-${i % 10}` }),
            ),
          );
          if (i % 50 === 0) await sleep(20);
        }

        await waitFor(async () => (await deadLetters.count()) === 1, 'the poisoned message to go dead', 60_000);
        await waitFor(
          () => others.every((id) => consumer.ids().has(id)),
          'every other message at the consumer',
          60_000,
        );
        const dead = await deadLetters.list();
        expect(dead.map((m) => m.messageId)).toEqual([poisonId]);
        expect(dead[0].attempts).toBe(MAX_ATTEMPTS);
        expect(dead[0].lastError).toContain('poisoned');
        expect(poisonSwitch.refused).toBe(MAX_ATTEMPTS);
        const stats = await outbox.stats();
        expect(stats.dead).toBe(1);
        // Per-key order: the message behind the dead head of its key waits.
        await sleep(500);
        expect(consumer.ids().has(poisonId)).toBe(false);
        expect(consumer.ids().has(followerId)).toBe(false);

        // The cause is fixed; requeue publishes it once, then its follower.
        poisonSwitch.on = false;
        expect(await deadLetters.requeue([poisonId])).toBe(1);
        await waitFor(
          () => consumer.ids().has(poisonId) && consumer.ids().has(followerId),
          'the requeued message and its follower',
          30_000,
        );
        await waitFor(
          async () => (await ds.getRepository(OutboxMessage).countBy({ status: 'sent' })) === OTHERS + 2,
          'every row sent',
          30_000,
        );
        await sleep(500);

        const ids = [poisonId, followerId, ...others];
        const received = consumer.ids();
        const order = consumer.deliveries.map((d) => d.messageId);
        recordFaultRun({
          scenario: SCENARIO,
          variant: `${DATABASE_LABEL[kind]} → RabbitMQ`,
          events: ids.length,
          lost: ids.filter((id) => !received.has(id)).length,
          duplicatePublishes: consumer.deliveries.length - received.size,
        });
        expect(consumer.deliveries.filter((d) => d.messageId === poisonId)).toHaveLength(1);
        expect(order.indexOf(poisonId)).toBeLessThan(order.indexOf(followerId));
        expect(consumer.deliveries.length).toBe(ids.length);
        expect(await deadLetters.count()).toBe(0);
        expect((await outbox.stats()).pending).toBe(0);
      });
    },
  );
}
