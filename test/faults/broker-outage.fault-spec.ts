/**
 * Fault 3: the path to RabbitMQ is cut for 10 s while ~1,000 messages wait. Nothing may be lost, the backlog must
 * drain after the path is restored with no restart, and the library's error log must stay bounded: it once wrote one
 * warning per message per failed attempt (402 lines in 10 s); the publisher now writes a rate-limited summary.
 */
import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OutboxMessage, OutboxService } from '../../src';
import { createOutboxTestingModule } from '../fixtures/outbox-app';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from '../helpers/databases';
import { waitFor } from '../helpers/ports';
import { describeWith, SERVICES } from '../helpers/services';
import { TcpProxy } from '../helpers/tcp-proxy';
import { CapturingLogger } from './support/log-capture';
import { produceOrders, sleep } from './support/produce';
import { deleteQueues, rmqClient, uniqueQueue } from './support/rabbitmq';
import { RecordingConsumer } from './support/recording-consumer';
import { recordFaultRun } from './support/report';

const SCENARIO = '3 broker outage (10 s)';
const EVENTS = 1_500;
const OUTAGE_MS = 10_000;
/**
 * Error and warning lines the library (loggers named Outbox*) may write during the outage: about two per second,
 * never one per message. Nest's own ClientProxy reconnect lines are not counted.
 */
const MAX_PROBLEM_LINES = 20;

describeWith(
  ['postgres', 'rabbitmq'],
  `Fault ${SCENARIO}: RabbitMQ path cut mid-run, publisher on ${DATABASE_LABEL.postgres}`,
  () => {
    let db: TestDatabase;
    let app: INestApplication;
    let proxy: TcpProxy;
    let consumer: RecordingConsumer;
    const logger = new CapturingLogger();
    const queue = uniqueQueue('outage');

    beforeAll(async () => {
      db = await createTestDatabase('postgres');
      proxy = await new TcpProxy(SERVICES.rabbitmq.host, SERVICES.rabbitmq.port).start();
      consumer = await new RecordingConsumer(queue).start();
      const moduleRef = await createOutboxTestingModule({
        db,
        client: rmqClient(queue, `amqp://guest:guest@127.0.0.1:${proxy.port}`),
        outbox: {
          publisher: { pollingInterval: 500, publishTimeout: 2_000, leaseDuration: 5_000 },
          retry: { initialDelay: 200, maxDelay: 2_000, maxAttempts: 1_000 },
        },
      });
      app = moduleRef.createNestApplication({ logger });
      app.useLogger(logger);
      await app.init();
    });

    afterAll(async () => {
      await app?.close();
      await proxy?.stop();
      await consumer?.stop();
      await db?.drop();
      await deleteQueues(queue);
    });

    it('loses nothing, drains the backlog after the path is restored, keeps its error log bounded, needs no restart', async () => {
      const outbox = app.get(OutboxService);
      const ds = app.get(DataSource);
      let outageFrom = 0;
      let outageTo = 0;
      const producing = produceOrders(outbox, { total: EVENTS, concurrency: 2, pauseMs: 10 });
      // Let traffic flow, then cut the path to the broker (every open connection dropped, new ones refused).
      await waitFor(() => consumer.ids().size >= 200, 'the first 200 messages before the outage', 60_000);
      outageFrom = Date.now();
      proxy.cut();
      await sleep(OUTAGE_MS);
      proxy.restore();
      outageTo = Date.now();
      const ids = await producing;

      await waitFor(
        () => consumer.ids().size >= EVENTS,
        `all ${EVENTS} messages at the consumer after the outage`,
        180_000,
      ).catch(() => undefined);
      await waitFor(
        async () => (await ds.getRepository(OutboxMessage).countBy({ status: 'sent' })) === EVENTS,
        'every outbox row marked sent',
        60_000,
      ).catch(() => undefined);

      const received = consumer.ids();
      const lost = ids.filter((id) => !received.has(id)).length;
      const duplicates = consumer.deliveries.length - received.size;
      const problems = logger.problems(outageFrom, outageTo + 2_000).filter((l) => l.context.startsWith('Outbox'));
      recordFaultRun({
        scenario: SCENARIO,
        variant: `${DATABASE_LABEL.postgres} → RabbitMQ`,
        events: ids.length,
        lost,
        duplicatePublishes: duplicates,
      });

      expect(ids).toHaveLength(EVENTS);
      expect(lost).toBe(0);
      expect(await ds.getRepository(OutboxMessage).countBy({ status: 'sent' })).toBe(EVENTS);
      expect(await ds.getRepository(OutboxMessage).countBy({ status: 'dead' })).toBe(0);
      if (problems.length > MAX_PROBLEM_LINES) {
        const sample = problems
          .slice(0, 5)
          .map((l) => `[${l.context}] ${l.message}`)
          .join('\n');
        throw new Error(
          `${problems.length} error/warning lines during a ${OUTAGE_MS} ms outage (bound ${MAX_PROBLEM_LINES}); first:\n${sample}`,
        );
      }
    });
  },
);
