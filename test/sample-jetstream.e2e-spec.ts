import type { INestApplication } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { connect } from 'nats';
import request from 'supertest';
import { createSampleApp } from '../sample/app';
import { readSampleConfig, SampleConfig } from '../sample/config';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from './helpers/databases';
import { NATS_URL } from './helpers/jetstream';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/**
 * The sample shop switched to JetStream the documented way (`BROKER_URL=nats://…` + `NATS_STREAM`): it creates the
 * stream, its outbox publishes `OrderPlaced` through `OutboxJetStreamClient`, and its consumer applies it through
 * `OutboxJetStreamServer` once; a retried order is replayed and publishes nothing more.
 */
describeWith(['postgres', 'nats'], 'Sample shop on PostgreSQL + NATS JetStream (NATS_STREAM)', () => {
  const stream = `SAMPLE_SHOP_T_${randomBytes(4).toString('hex')}`.toUpperCase();
  let db: TestDatabase;
  let app: INestApplication;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    const env = { BROKER_URL: NATS_URL, NATS_STREAM: stream, BROKER_QUEUE: 'sample-shop' };
    const config: SampleConfig = {
      ...readSampleConfig(env),
      port: 0,
      database: db.options,
      databaseLabel: DATABASE_LABEL.postgres,
    };
    app = await createSampleApp(config, { logger: ['error'] });
    await app.startAllMicroservices();
    await app.listen(0, '127.0.0.1');
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
    const nc = await connect({ servers: NATS_URL });
    await (await nc.jetstreamManager()).streams.delete(stream).catch(() => undefined);
    await nc.close();
  });

  it('an order is published to the stream once and applied once by the JetStream consumer', async () => {
    const http = () => request(app.getHttpServer());
    const order = { customerId: 'js-1', reference: 'ord-js-1', amount: 1200 };
    const placed = await http().post('/orders').set('Idempotency-Key', 'order-js-1').send(order).expect(201);
    await waitFor(
      async () => (await http().get('/customers/js-1').expect(200)).body.orders === 1,
      'the JetStream consumer to apply the order',
      30_000,
    );
    const retry = await http().post('/orders').set('Idempotency-Key', 'order-js-1').send(order).expect(201);
    expect(retry.body.id).toBe(placed.body.id);
    await waitFor(async () => (await http().get('/outbox')).body.pending === 0, 'the outbox to drain');

    const nc = await connect({ servers: NATS_URL });
    try {
      const info = await (await nc.jetstreamManager()).streams.info(stream);
      expect(info.config.subjects).toEqual(['OrderPlaced']);
      expect(info.state.messages).toBe(1);
    } finally {
      await nc.close();
    }
    expect((await http().get('/customers/js-1').expect(200)).body).toEqual({ id: 'js-1', orders: 1, totalSpent: 1200 });
    expect((await http().get('/outbox').expect(200)).body).toMatchObject({ pending: 0, dead: 0 });
  });
});
