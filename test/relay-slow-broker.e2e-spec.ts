/**
 * A slow broker: every chunk to and from it is delayed by a proxy the test owns, so that each confirm (RabbitMQ
 * publisher confirm, MQTT PUBACK at QoS 1) comes at 1.5 × `publishTimeout`. A late confirm must still count: every
 * message marked sent, none dead (with `retry.maxAttempts` 3, a timeout counted as a failure would kill them), no
 * attempt spent, and at most one extra delivery per message at a raw consumer on the broker.
 */
import { Transport } from '@nestjs/microservices';
import { DataSource } from 'typeorm';
import { OutboxPublisher, OutboxService } from '../src';
import { CapturingLogger } from './faults/support/log-capture';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { createTestDatabase, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith, SERVICES } from './helpers/services';
import { runSlowBroker, SlowBrokerTransport } from './helpers/slow-broker';
import { TcpProxy } from './helpers/tcp-proxy';

const PUBLISH_TIMEOUT = 1_000;
/** Each way: a confirm's round trip is 1.5 × PUBLISH_TIMEOUT. */
const DELAY_MS = 750;

const CASES: Array<{ transport: SlowBrokerTransport; label: string; service: 'rabbitmq' | 'mqtt'; events: number }> = [
  { transport: 'rmq', label: 'RabbitMQ (publisher confirms)', service: 'rabbitmq', events: 2_000 },
  { transport: 'mqtt', label: 'MQTT 5 (QoS 1 PUBACK)', service: 'mqtt', events: 2_000 },
];

for (const c of CASES) {
  describeWith(
    ['postgres', c.service],
    `Relay with a slow broker: ${c.label}, confirms at 1.5 × publishTimeout`,
    () => {
      let db: TestDatabase;
      beforeAll(async () => {
        db = await createTestDatabase('postgres');
      });
      afterAll(async () => {
        await db?.drop();
      });

      it(`marks all ${c.events} messages sent, none dead, no attempt spent, at most one extra delivery each`, async () => {
        const logger = new CapturingLogger();
        const figures = await runSlowBroker({
          db,
          transport: c.transport,
          events: c.events,
          publishTimeout: PUBLISH_TIMEOUT,
          delayMs: DELAY_MS,
          logger,
        });
        console.log(`slow broker, ${c.label}: ${JSON.stringify(figures)}`);
        const warnings = logger.lines.filter((l) => /confirms late/.test(l.message));

        expect(figures).toMatchObject({ lost: 0, dead: 0, sent: figures.events, maxAttempts: 1 });
        // Said in the publisher's state, its gauge and the confirm-latency histogram.
        expect(figures).toMatchObject({ sawBrokerSlow: true, gaugeSaidSlow: true });
        expect(figures.lateConfirmsInHistogram).toBeGreaterThan(0);
        expect(figures.maxDeliveriesOfOne).toBeLessThanOrEqual(2);
        expect(figures.duplicates).toBeLessThanOrEqual(figures.events);
        // One warning when confirms turn late (an episode may end and start again, never one line per message).
        expect(warnings.length).toBeGreaterThanOrEqual(1);
        expect(warnings.length).toBeLessThanOrEqual(3);
      });
    },
  );
}

describeWith(
  ['postgres', 'rabbitmq'],
  'Relay with a slow broker and a replica: confirms (4 s) outlast the lease (3 s)',
  () => {
    let db: TestDatabase;
    beforeAll(async () => {
      db = await createTestDatabase('postgres');
    });
    afterAll(async () => {
      await db?.drop();
    });

    it('keeps the lease while a confirm is late, so the replica never publishes a message again', async () => {
      // Confirms take 4 s; a lease lasts 3 s unless extended. Were it not, the replica would claim and republish.
      const figures = await runSlowBroker({
        db,
        transport: 'rmq',
        events: 500,
        publishTimeout: 1_000,
        leaseDuration: 3_000,
        delayMs: 2_000,
        replica: true,
        logger: new CapturingLogger(),
      });
      console.log(`slow broker with a replica: ${JSON.stringify(figures)}`);
      expect(figures).toMatchObject({ lost: 0, dead: 0, sent: figures.events, maxAttempts: 1 });
      expect(figures.duplicates).toBe(0);
    }, 180_000);
  },
);

describeWith(['postgres', 'rabbitmq'], 'Relay with a slow broker: shutting down while confirms are late', () => {
  let db: TestDatabase;
  let proxy: TcpProxy;
  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    proxy = await new TcpProxy(SERVICES.rabbitmq.host, SERVICES.rabbitmq.port).start();
  });
  afterAll(async () => {
    await proxy?.stop();
    await db?.drop();
  });

  it('stops waiting for late confirms on close: the rows stay pending, their attempts given back', async () => {
    const queue = `outbox-slow-close-${Date.now().toString(36)}`;
    const moduleRef = await createOutboxTestingModule({
      db,
      client: {
        transport: Transport.RMQ,
        options: { urls: [`amqp://guest:guest@127.0.0.1:${proxy.port}`], queue, queueOptions: { durable: false } },
      } as never,
      outbox: {
        // Without the stop check, close() would wait up to maxConfirmWait (10 min) for confirms that take 2 min.
        publisher: { pollingInterval: 100, publishTimeout: 500, maxConfirmWait: 600_000 },
        cleanup: { enabled: false },
      },
    });
    const app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    const outbox = app.get(OutboxService);
    const publisher = app.get(OutboxPublisher);
    await outbox.transaction(() => outbox.emit('OrderPlaced', { n: -1 }));
    await waitFor(async () => (await outbox.stats()).pending === 0, 'the warm-up message sent', 30_000);
    proxy.delay(60_000);
    await outbox.transaction(() =>
      outbox.emitMany(Array.from({ length: 50 }, (_, n) => ({ pattern: 'OrderPlaced', payload: { n } }))),
    );
    await waitFor(() => publisher.brokerSlow, 'the broker reported slow', 30_000);
    // The publisher's own shutdown (the first step of app.close()) must end without the confirms.
    await publisher.onModuleDestroy();

    const rows: Array<{ status: string; attempts: number }> = await app
      .get(DataSource)
      .query(`SELECT status, attempts FROM outbox_messages WHERE status <> 'sent'`);
    // The rest of app.close() is Nest's RMQ client closing its channel over the slowed link, which waits for the
    // broker: not the library's wait. Drop the link and give it a few seconds.
    await proxy.stop();
    await Promise.race([app.close(), new Promise((resolve) => setTimeout(resolve, 5_000).unref())]);
    expect(rows).toHaveLength(50);
    expect(rows.every((r) => r.status === 'pending' && Number(r.attempts) === 0)).toBe(true);
  });
});
