import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { createSampleApp, startSampleApp } from '../sample/app';
import { parseBrokerUrl, SampleConfig } from '../sample/config';
import { deleteQueue, RABBITMQ_URL, uniqueQueue } from './helpers/consumers';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith, SERVICES } from './helpers/services';
import { TcpProxy } from './helpers/tcp-proxy';

/**
 * The sample started the way `npm run sample` starts it (`startSampleApp`: HTTP first, the consumer not awaited)
 * while RabbitMQ is unreachable — its path is a TCP proxy owned by this test, cut from the start. HTTP must serve:
 * `POST /orders` is accepted and its event waits in the outbox; once the path is restored, the consumer starts
 * and the event is delivered, without a restart.
 */
describeWith(['postgres', 'rabbitmq'], `Sample shop on ${DATABASE_LABEL.postgres} with RabbitMQ down at start`, () => {
  let db: TestDatabase;
  let app: INestApplication;
  let proxy: TcpProxy;
  let queue: string;
  let consumer: Promise<boolean>;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    queue = uniqueQueue('sample-broker-down');
    proxy = await new TcpProxy(SERVICES.rabbitmq.host, SERVICES.rabbitmq.port).start();
    proxy.cut();
    const url = new URL(RABBITMQ_URL);
    url.port = String(proxy.port);
    const config: SampleConfig = {
      port: 0,
      database: db.options,
      databaseLabel: DATABASE_LABEL.postgres,
      broker: parseBrokerUrl(url.toString(), queue),
    };
    app = await createSampleApp(config, { logger: false });
    ({ consumer } = await startSampleApp(app, 0, '127.0.0.1'));
  });

  afterAll(async () => {
    await app?.close();
    await proxy?.stop();
    await db?.drop();
    if (queue) await deleteQueue(queue);
  });

  it('answers POST /orders with 201 while the broker is unreachable; the event waits in the outbox', async () => {
    const res = await fetch(`${await app.getUrl()}/orders`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': 'down-1' },
      body: JSON.stringify({ customerId: 'ada', reference: 'A-1', amount: 2500 }),
    });
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({ customerId: 'ada', reference: 'A-1', amount: 2500 });
    const rows = await app.get(DataSource).query('SELECT pattern, status FROM outbox_messages');
    expect(rows).toEqual([{ pattern: 'OrderPlaced', status: 'pending' }]);
    const customer = await (await fetch(`${await app.getUrl()}/customers/ada`)).json();
    expect(customer).toMatchObject({ orders: 0 });
  });

  it('delivers the event once the path to RabbitMQ is restored (the consumer starts then)', async () => {
    proxy.restore();
    await expect(consumer).resolves.toBe(true);
    const base = await app.getUrl();
    await waitFor(
      async () => ((await (await fetch(`${base}/customers/ada`)).json()) as { orders: number }).orders === 1,
      'the consumer to apply the OrderPlaced written while RabbitMQ was down',
      90_000,
    );
    expect(await (await fetch(`${base}/customers/ada`)).json()).toMatchObject({ orders: 1, totalSpent: 2500 });
    expect(await app.get(DataSource).query('SELECT status FROM outbox_messages')).toEqual([{ status: 'sent' }]);
  });
});
