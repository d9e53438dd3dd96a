import type { INestApplication } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { OutboxJetStreamClient, OutboxService } from '../src';
import type { JetStreamConsumerConfig } from './faults/apps/jetstream-consumer.main';
import { ChildApp } from './faults/support/child-app';
import { FAULT_ENTITIES, FaultCounter, FaultEffect } from './faults/support/entities';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { createTestDatabase, TestDatabase } from './helpers/databases';
import { NATS_URL, TestStream } from './helpers/jetstream';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

jest.setTimeout(180_000);

const APPLIED = 'applied';

describeWith(
  ['postgres', 'nats'],
  'Consuming JetStream with OutboxJetStreamServer and @Idempotent() on PostgreSQL',
  () => {
    let db: TestDatabase;
    let app: INestApplication;
    let stream: TestStream;
    let consumer: ChildApp;

    beforeAll(async () => {
      db = await createTestDatabase('postgres');
      stream = await new TestStream(600_000).create(); // covers the default lease (30 s) + retry.maxDelay (5 min)
      const moduleRef = await createOutboxTestingModule({
        db,
        client: { customClass: OutboxJetStreamClient, options: { servers: [NATS_URL], stream: stream.name } } as any,
        outbox: { publisher: { pollingInterval: 50 } },
        imports: [TypeOrmModule.forFeature(FAULT_ENTITIES)],
      });
      app = moduleRef.createNestApplication();
      app.useLogger(false);
      await app.init();
      await app.get(DataSource).getRepository(FaultCounter).save({ name: APPLIED, value: 0 });
      consumer = new ChildApp(
        'jetstream-consumer.main.ts',
        {
          db: db.options,
          servers: [NATS_URL],
          stream: stream.name,
          consumer: 'billing',
          subject: stream.subject('order'),
          hangMarker: join(mkdtempSync(join(tmpdir(), 'outbox-js-')), 'hung'),
        } satisfies JetStreamConsumerConfig,
        'jetstream-consumer',
      );
      await consumer.start();
    });

    afterAll(async () => {
      await consumer?.stop();
      await app?.close();
      await stream?.delete();
      await db?.drop();
    });

    const emit = (payload: object) => {
      const outbox = app.get(OutboxService);
      return outbox.transaction(() => outbox.emit(stream.subject('order'), payload));
    };
    const effectsOf = (id: string) => app.get(DataSource).getRepository(FaultEffect).countBy({ source: id });
    const applied = async () =>
      (await app.get(DataSource).getRepository(FaultCounter).findOneByOrFail({ name: APPLIED })).value;
    const deliveriesOf = (id: string) =>
      consumer.signals.filter((s) => s.type === 'delivery' && s.id === id).map((s) => s.delivery);

    it('a consumer SIGKILLed mid-handler: the message is redelivered and applied once', async () => {
      const before = await applied();
      const id = await emit({ hang: true });
      await consumer.waitForSignal((s) => s.type === 'hanging' && s.id === id);
      const killed = consumer.pid;
      await consumer.kill();
      await consumer.start();
      await waitFor(
        async () => (await effectsOf(id)) === 1,
        'the redelivered message applied',
        60_000,
        async () => JSON.stringify(consumer.signals),
      );
      // Delivered again, to the new process, after the kill.
      expect(deliveriesOf(id)[0]).toBe(1);
      const later = consumer.signals.filter((s) => s.type === 'delivery' && s.id === id && s.pid !== killed);
      expect(later.length).toBeGreaterThanOrEqual(1);
      // Applied once: a further delivery (ack wait is 2 s) is skipped by @Idempotent().
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      expect(await effectsOf(id)).toBe(1);
      expect(await applied()).toBe(before + 1);
    });

    it('a poison message is delayed, then terminated after maxDeliveries; the messages behind it go through', async () => {
      const before = await applied();
      const poison = await emit({ poison: true });
      const ids: string[] = [];
      for (let n = 0; n < 20; n++) ids.push(await emit({ n }));
      await waitFor(
        async () => (await Promise.all(ids.map(effectsOf))).every((count) => count === 1),
        'every message behind the poison applied',
        60_000,
      );
      await waitFor(() => deliveriesOf(poison).length === 3, 'three deliveries of the poison message', 30_000);
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      if (deliveriesOf(poison).length !== 3) console.log(consumer.tail(40));
      expect(deliveriesOf(poison)).toEqual([1, 2, 3]);
      expect(await effectsOf(poison)).toBe(0);
      expect(await applied()).toBe(before + ids.length);
    });

    it('a message the handler terminates (context.term()) is not redelivered', async () => {
      const id = await emit({ invalid: true });
      await waitFor(() => deliveriesOf(id).length === 1, 'the invalid message delivered');
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      expect(deliveriesOf(id)).toEqual([1]);
    });
  },
);
