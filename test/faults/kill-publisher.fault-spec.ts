import type { INestApplication } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { OutboxMessage, OutboxService } from '../../src';
import { TestOrder } from '../fixtures/order.entity';
import { createOutboxTestingModule } from '../fixtures/outbox-app';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from '../helpers/databases';
import { waitFor } from '../helpers/ports';
import { describeWith } from '../helpers/services';
import type { PublisherAppConfig } from './apps/publisher.main';
import { ChildApp } from './support/child-app';
import { FAULT_ENTITIES, FaultCounter, FaultEffect } from './support/entities';
import { killRepeatedly } from './support/kill-loop';
import { APPLIED_COUNTER, deliverySink, ObservedDelivery, OrderConsumer } from './support/order-consumer';
import { produceOrders } from './support/produce';
import { deleteQueues, rmqServer, uniqueQueue } from './support/rabbitmq';
import { recordFaultRun } from './support/report';

const SCENARIO = '1 kill the publisher';
const ORDERS = 5_000;
const MIN_KILLS = 5;
/** Short lease and publish timeout, so rows claimed by a killed publisher are taken over within seconds. */
const PUBLISHER: PublisherAppConfig['publisher'] = {
  pollingInterval: 200,
  batchSize: 200,
  publishTimeout: 2_000,
  leaseDuration: 3_500,
};
const RETRY: PublisherAppConfig['retry'] = { initialDelay: 100, maxDelay: 1_000, maxAttempts: 1_000 };

/**
 * The consumer (in this process): `@Idempotent()` handler on RabbitMQ with `noAck: false`, applying a
 * non-idempotent increment. Resolves with the app and every delivery it saw.
 */
async function startConsumerApp(db: TestDatabase, queue: string) {
  const deliveries: ObservedDelivery[] = [];
  deliverySink.report = (d) => deliveries.push(d);
  const moduleRef = await createOutboxTestingModule({
    db,
    outbox: { publisher: { enabled: false } },
    imports: [TypeOrmModule.forFeature(FAULT_ENTITIES)],
    controllers: [OrderConsumer],
  });
  const app = moduleRef.createNestApplication({ logger: ['error'] });
  app.connectMicroservice(rmqServer(queue, 100), { inheritAppConfig: true });
  await app.init();
  await app.get(DataSource).getRepository(FaultCounter).save({ name: APPLIED_COUNTER, value: 0 });
  await app.startAllMicroservices();
  return { app, deliveries };
}

/** Figures of one run, compared by message id between the producer's outbox and the consumer's effects. */
async function measure(outboxDs: DataSource, consumerDs: DataSource, deliveries: ObservedDelivery[]) {
  const outboxIds = (await outboxDs.getRepository(OutboxMessage).find({ select: { messageId: true } })).map(
    (m) => m.messageId,
  );
  const effects = (await consumerDs.getRepository(FaultEffect).find({ select: { source: true } })).map((e) => e.source);
  const applied = new Set(effects);
  const delivered = new Set(deliveries.map((d) => d.messageId));
  const counter = (await consumerDs.getRepository(FaultCounter).findOneByOrFail({ name: APPLIED_COUNTER })).value;
  return {
    events: outboxIds.length,
    lost: outboxIds.filter((id) => !applied.has(id)).length,
    duplicatePublishes: deliveries.filter((d) => !d.redelivered).length - delivered.size,
    redeliveries: deliveries.filter((d) => d.redelivered).length,
    duplicateEffects: effects.length - applied.size,
    counter,
    orders: await outboxDs.getRepository(TestOrder).count(),
    unsent: await outboxDs.getRepository(OutboxMessage).count({ where: [{ status: 'pending' }, { status: 'dead' }] }),
  };
}

for (const kind of ['postgres', 'mariadb'] as DatabaseKind[]) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `Fault ${SCENARIO}: publisher process SIGKILLed ${MIN_KILLS}+ times on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let consumer: Awaited<ReturnType<typeof startConsumerApp>>;
      let publisher: ChildApp;
      const queue = uniqueQueue(`kill-pub-${kind}`);

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        consumer = await startConsumerApp(db, queue);
        publisher = new ChildApp(
          'publisher.main.ts',
          { db: db.options, queue, publisher: PUBLISHER, retry: RETRY } satisfies PublisherAppConfig,
          `publisher-${kind}`,
        );
      });

      afterAll(async () => {
        await publisher?.stop();
        await consumer?.app.close();
        await db?.drop();
        await deleteQueues(queue);
      });

      it(`every one of ${ORDERS} events is applied exactly once (duplicate publishes absorbed by @Idempotent())`, async () => {
        const app: INestApplication = consumer.app;
        const ds = app.get(DataSource);
        let produced = false;
        const producing = produceOrders(app.get(OutboxService), { total: ORDERS, concurrency: 4 }).finally(() => {
          produced = true;
        });
        await killRepeatedly(publisher, { minKills: MIN_KILLS, lifeMs: [700, 2_500], until: () => produced });
        await producing;
        const counterAt = async () =>
          (await ds.getRepository(FaultCounter).findOneByOrFail({ name: APPLIED_COUNTER })).value;
        await waitFor(async () => (await counterAt()) >= ORDERS, `${ORDERS} applied events`, 180_000).catch(
          () => undefined,
        );
        await waitFor(
          async () => (await ds.getRepository(OutboxMessage).countBy({ status: 'sent' })) === ORDERS,
          'every row marked sent',
          30_000,
        ).catch(() => undefined);

        const m = await measure(ds, ds, consumer.deliveries);
        recordFaultRun({ scenario: SCENARIO, variant: DATABASE_LABEL[kind], kills: publisher.kills, ...m });
        expect(publisher.kills).toBeGreaterThanOrEqual(MIN_KILLS);
        expect(m.orders).toBe(ORDERS);
        expect(m.events).toBe(ORDERS);
        expect(m.lost).toBe(0);
        expect(m.duplicateEffects).toBe(0);
        expect(m.counter).toBe(ORDERS);
        expect(m.unsent).toBe(0);
        expect(await app.get(OutboxService).stats()).toMatchObject({ pending: 0, due: 0, inFlight: 0, dead: 0 });
      }, 400_000);
    },
  );
}

describeWith(
  ['rabbitmq'],
  `Fault ${SCENARIO}: single process (producer + publisher) SIGKILLed ${MIN_KILLS}+ times on ${DATABASE_LABEL.sqlite}`,
  () => {
    let producerDb: TestDatabase;
    let consumerDb: TestDatabase;
    let consumer: Awaited<ReturnType<typeof startConsumerApp>>;
    let child: ChildApp;
    const queue = uniqueQueue('kill-pub-sqlite');

    beforeAll(async () => {
      producerDb = await createTestDatabase('sqlite');
      consumerDb = await createTestDatabase('sqlite');
      consumer = await startConsumerApp(consumerDb, queue);
      child = new ChildApp(
        'publisher.main.ts',
        {
          db: { ...producerDb.options, enableWAL: true } as any,
          synchronize: true,
          queue,
          publisher: PUBLISHER,
          retry: RETRY,
          produce: { total: ORDERS, concurrency: 2 },
        } satisfies PublisherAppConfig,
        'producer-publisher-sqlite',
      );
    });

    afterAll(async () => {
      await child?.stop();
      await consumer?.app.close();
      await producerDb?.drop();
      await consumerDb?.drop();
      await deleteQueues(queue);
    });

    it(`every one of ${ORDERS} events is applied exactly once; orders resume after each kill`, async () => {
      const ds = consumer.app.get(DataSource);
      const produced = () => child.signals.some((s) => s.type === 'produced');
      // Longer lives than on the servers: the producer lives in this process too and must make progress between kills.
      await killRepeatedly(child, { minKills: MIN_KILLS, lifeMs: [1_500, 4_000], until: produced });
      await child.waitForSignal((s) => s.type === 'produced', 180_000).catch(() => undefined);
      const counterAt = async () =>
        (await ds.getRepository(FaultCounter).findOneByOrFail({ name: APPLIED_COUNTER })).value;
      await waitFor(async () => (await counterAt()) >= ORDERS, `${ORDERS} applied events`, 180_000).catch(
        () => undefined,
      );
      await child.stop();

      const producerDs = await new DataSource({
        ...producerDb.options,
        entities: [TestOrder, OutboxMessage],
      } as any).initialize();
      try {
        const m = await measure(producerDs, ds, consumer.deliveries);
        recordFaultRun({
          scenario: SCENARIO,
          variant: `${DATABASE_LABEL.sqlite}, single process`,
          kills: child.kills,
          ...m,
        });
        expect(child.kills).toBeGreaterThanOrEqual(MIN_KILLS);
        expect(m.orders).toBe(ORDERS);
        expect(m.events).toBe(ORDERS);
        expect(m.lost).toBe(0);
        expect(m.duplicateEffects).toBe(0);
        expect(m.counter).toBe(ORDERS);
        expect(m.unsent).toBe(0);
      } finally {
        await producerDs.destroy();
      }
    }, 400_000);
  },
);
