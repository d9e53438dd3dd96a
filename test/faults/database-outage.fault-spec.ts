/**
 * The path to PostgreSQL is cut for a few seconds under `@Idempotent()` HTTP handlers and the publisher: requests are
 * answered 503 problem+json with `Retry-After` (src/idempotency/database-unavailable.ts classifies the connection
 * errors), never a 500 or a hang; after the path is restored requests succeed again by themselves, the keys that got
 * 503 are free, and the publisher delivers every event (0 lost).
 */
import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OutboxMessage } from '../../src';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from '../helpers/databases';
import { waitFor } from '../helpers/ports';
import { describeWith, SERVICES } from '../helpers/services';
import { TcpProxy } from '../helpers/tcp-proxy';
import { FaultEffect } from './support/entities';
import { startHttpApp } from './support/http-app';
import { isProblem, isReplay, postOrder, RawResponse } from './support/http';
import { CapturingLogger } from './support/log-capture';
import { sleep } from './support/produce';
import { deleteQueues, rmqClient, uniqueQueue } from './support/rabbitmq';
import { RecordingConsumer } from './support/recording-consumer';
import { recordFaultRun } from './support/report';

const SCENARIO = '4 database outage';
const OUTAGE_MS = 8_000;

describeWith(
  ['postgres', 'rabbitmq'],
  `Fault ${SCENARIO}: path to ${DATABASE_LABEL.postgres} cut mid-run under @Idempotent() HTTP handlers and the publisher`,
  () => {
    let db: TestDatabase;
    let proxy: TcpProxy;
    let app: INestApplication;
    let url: string;
    let consumer: RecordingConsumer;
    const logger = new CapturingLogger();
    const queue = uniqueQueue('db-outage');

    beforeAll(async () => {
      const real = await createTestDatabase('postgres');
      proxy = await new TcpProxy(SERVICES.postgres.host, SERVICES.postgres.port).start();
      db = { ...real, options: { ...real.options, port: proxy.port } as any };
      consumer = await new RecordingConsumer(queue).start();
      ({ app, url } = await startHttpApp(db, {
        client: rmqClient(queue),
        outbox: {
          publisher: { pollingInterval: 300, publishTimeout: 2_000, leaseDuration: 4_000 },
          retry: { initialDelay: 100, maxDelay: 1_000 },
        },
        logger,
      }));
    });

    afterAll(async () => {
      await app?.close();
      await proxy?.stop();
      await consumer?.stop();
      await db?.drop();
      await deleteQueues(queue);
    });

    it('answers 503 problem+json while the database is unreachable (no hang, no 500), then recovers with the publisher', async () => {
      const run = `outage-${Date.now()}`;
      const before: RawResponse[] = [];
      for (let i = 0; i < 5; i++) before.push(await postOrder(url, `${run}-before-${i}`, { i }));
      expect(before.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);

      proxy.cut();
      const during: (RawResponse & { key: string })[] = [];
      const outageEnds = Date.now() + OUTAGE_MS;
      for (let i = 0; Date.now() < outageEnds; i++) {
        const key = `${run}-during-${i}`;
        during.push({ ...(await postOrder(url, key, { i })), key });
        await sleep(250);
      }
      proxy.restore();

      // Recovery: new requests succeed again by themselves (the pool reconnects), and the keys that got 503 are free.
      let recovered: RawResponse | undefined;
      const transitional: RawResponse[] = [];
      await waitFor(
        async () => {
          const r = await postOrder(url, `${run}-after-${transitional.length}`, { after: true });
          if (r.status === 201) recovered = r;
          else transitional.push(r);
          return recovered !== undefined;
        },
        'a 201 after the outage',
        60_000,
      ).catch(() => undefined);
      const retried = await Promise.all(during.map((d, i) => postOrder(url, d.key, { i })));

      const ds = app.get(DataSource);
      const effects = await ds.getRepository(FaultEffect).count();
      await waitFor(async () => consumer.ids().size >= effects, 'every event at the consumer', 60_000).catch(
        () => undefined,
      );
      const outboxIds = (await ds.getRepository(OutboxMessage).find({ select: { messageId: true } })).map(
        (m) => m.messageId,
      );
      const received = consumer.ids();

      const expected503 = [...during, ...transitional].filter((r) => r.status === 503);
      const unexpected5xx = [
        ...before,
        ...during,
        ...transitional,
        ...(recovered ? [recovered] : []),
        ...retried,
      ].filter((r) => r.status >= 500 && !expected503.includes(r));
      recordFaultRun({
        scenario: SCENARIO,
        variant: `${DATABASE_LABEL.postgres} via proxy`,
        events: outboxIds.length,
        lost: outboxIds.filter((id) => !received.has(id)).length,
        duplicatePublishes: consumer.deliveries.length - received.size,
        http5xx: unexpected5xx.length,
      });

      expect(during.length).toBeGreaterThan(5);
      expect(during.map((r) => r.status)).toEqual(during.map(() => 503));
      for (const r of during) {
        expect(isProblem(r)).toBe(true);
        expect(r.json).toMatchObject({ status: 503, title: expect.any(String), detail: expect.any(String) });
        expect(r.body).not.toMatch(/\bat .+\.(js|ts):\d+/); // no stack trace
      }
      expect(transitional.every((r) => r.status === 503)).toBe(true);
      expect(recovered?.status).toBe(201);
      expect(retried.map((r) => `${r.status}${isReplay(r) ? ' replay' : ''}`)).toEqual(retried.map(() => '201'));
      expect(unexpected5xx).toHaveLength(0);
      expect(outboxIds.length).toBe(effects);
      expect(outboxIds.filter((id) => !received.has(id))).toEqual([]);
    });
  },
);
