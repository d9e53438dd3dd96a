import type { INestApplication } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { OutboxMessage, OutboxService } from '../../src';
import { createOutboxTestingModule } from '../fixtures/outbox-app';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from '../helpers/databases';
import { waitFor } from '../helpers/ports';
import { describeWith } from '../helpers/services';
import type { ConsumerAppConfig } from './apps/consumer.main';
import { ChildApp } from './support/child-app';
import { FAULT_ENTITIES, FaultCounter, FaultEffect } from './support/entities';
import { killRepeatedly } from './support/kill-loop';
import { APPLIED_COUNTER } from './support/order-consumer';
import { produceOrders } from './support/produce';
import { deleteQueues, rmqClient, uniqueQueue } from './support/rabbitmq';
import { recordFaultRun } from './support/report';

const SCENARIO = '2 kill the consumer';
const EVENTS = 2_000;
const MIN_KILLS = 5;

describeWith(
  ['postgres', 'rabbitmq'],
  `Fault ${SCENARIO}: RabbitMQ consumer (noAck: false) SIGKILLed mid-batch ${MIN_KILLS}+ times, on ${DATABASE_LABEL.postgres}`,
  () => {
    let db: TestDatabase;
    let app: INestApplication;
    let consumer: ChildApp;
    const queue = uniqueQueue('kill-consumer');

    beforeAll(async () => {
      db = await createTestDatabase('postgres');
      const moduleRef = await createOutboxTestingModule({
        db,
        client: rmqClient(queue),
        outbox: { publisher: { pollingInterval: 200 } },
        imports: [TypeOrmModule.forFeature(FAULT_ENTITIES)],
      });
      app = moduleRef.createNestApplication({ logger: ['error'] });
      await app.init();
      await app.get(DataSource).getRepository(FaultCounter).save({ name: APPLIED_COUNTER, value: 0 });
      consumer = new ChildApp(
        'consumer.main.ts',
        { db: db.options, queue, prefetch: 100 } satisfies ConsumerAppConfig,
        'consumer',
      );
    });

    afterAll(async () => {
      await consumer?.stop();
      await app?.close();
      await db?.drop();
      await deleteQueues(queue);
    });

    it(`applies each of ${EVENTS} messages exactly once: redeliveries are absorbed, none is lost`, async () => {
      const ds = app.get(DataSource);
      const counter = async () =>
        (await ds.getRepository(FaultCounter).findOneByOrFail({ name: APPLIED_COUNTER })).value;
      const producing = produceOrders(app.get(OutboxService), { total: EVENTS, concurrency: 4, pauseMs: 4 });
      await consumer.start();
      // Kills while the producer is still writing: the queue holds a backlog and up to 100 messages are unacked.
      await killRepeatedly(consumer, { minKills: MIN_KILLS, lifeMs: [600, 1_800] });
      const ids = await producing;
      await waitFor(async () => (await counter()) >= EVENTS, `${EVENTS} applied messages`, 180_000).catch(
        () => undefined,
      );
      await waitFor(
        async () => (await ds.getRepository(OutboxMessage).countBy({ status: 'sent' })) === EVENTS,
        'every row marked sent',
        30_000,
      ).catch(() => undefined);

      const deliveries = consumer.signals.filter((s) => s.type === 'delivery') as unknown as {
        id: string;
        redelivered: boolean;
      }[];
      const effects = (await ds.getRepository(FaultEffect).find({ select: { source: true } })).map((e) => e.source);
      const applied = new Set(effects);
      const firstDeliveries = deliveries.filter((d) => !d.redelivered);
      const run = recordFaultRun({
        scenario: SCENARIO,
        variant: `${DATABASE_LABEL.postgres} ← RabbitMQ`,
        kills: consumer.kills,
        events: ids.length,
        lost: ids.filter((id) => !applied.has(id)).length,
        duplicatePublishes: firstDeliveries.length - new Set(firstDeliveries.map((d) => d.id)).size,
        redeliveries: deliveries.length - firstDeliveries.length,
        duplicateEffects: effects.length - applied.size,
      });
      expect(consumer.kills).toBeGreaterThanOrEqual(MIN_KILLS);
      expect(run.redeliveries).toBeGreaterThan(0); // the kills did hit messages in flight
      expect(run.lost).toBe(0);
      expect(run.duplicateEffects).toBe(0);
      expect(await counter()).toBe(EVENTS);
    });
  },
);
