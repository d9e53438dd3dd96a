import type { INestApplication } from '@nestjs/common';
import { ClientProxy, RmqRecord } from '@nestjs/microservices';
import { connect } from 'amqplib';
import { lastValueFrom } from 'rxjs';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { BROKER } from '../sample/app.module';
import { WelcomeEmail } from '../sample/signups/welcome-email.entity';
import { OutboxService } from '../src';
import { createSampleApp } from '../sample/app';
import { parseBrokerUrl, SampleConfig } from '../sample/config';
import { runDemo } from '../sample/demo';
import { CustomerTotals } from '../sample/customers/customer-totals.entity';
import { Order } from '../sample/orders/order.entity';
import { CREDIT_LIMIT } from '../sample/orders/orders.service';
import { RABBITMQ_URL, uniqueQueue } from './helpers/consumers';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { freePort, waitFor } from './helpers/ports';
import { readReadme } from './helpers/readme-snippets';
import { describeWith, ServiceName } from './helpers/services';

/**
 * The sample shop, booted the way `npm run sample` boots it (hybrid app: HTTP + in-process consumer), on the
 * embedded defaults (SQLite + TCP) and on PostgreSQL + RabbitMQ. Every endpoint, the four cases, and the demo.
 */
interface Setup {
  kind: DatabaseKind;
  transport: 'TCP' | 'RabbitMQ';
  services: ServiceName[];
  broker: (tcpPort: number, queue: string) => SampleConfig['broker'];
  /** Publishes `payload` as `OrderPlaced` with the given message id, as the broker would redeliver it. */
  redeliver: (client: ClientProxy, messageId: string, payload: unknown) => Promise<unknown>;
}

const setups: Setup[] = [
  {
    kind: 'sqlite',
    transport: 'TCP',
    services: [],
    broker: (tcpPort) => parseBrokerUrl(`tcp://127.0.0.1:${tcpPort}`, ''),
    // TCP has no header channel: the id travels in the outbox envelope (see docs/guarantees-and-limits.md).
    redeliver: (client, id, payload) =>
      lastValueFrom(client.emit('OrderPlaced', { $outbox: { id }, payload }), { defaultValue: undefined }),
  },
  {
    kind: 'postgres',
    transport: 'RabbitMQ',
    services: ['rabbitmq'],
    broker: (_tcpPort, queue) => parseBrokerUrl(RABBITMQ_URL, queue),
    redeliver: (client, id, payload) =>
      lastValueFrom(
        client.emit(
          'OrderPlaced',
          new RmqRecord(payload, { messageId: id, persistent: true, headers: { 'x-message-id': id } }),
        ),
        {
          defaultValue: undefined,
        },
      ),
  },
];

for (const setup of setups) {
  const title = `Sample shop on ${DATABASE_LABEL[setup.kind]} + ${setup.transport}`;
  describeWith([...servicesOf(setup.kind), ...setup.services], title, () => {
    let db: TestDatabase;
    let app: INestApplication;
    let baseUrl: string;
    let queue: string;
    let http: () => ReturnType<typeof request>;
    let closed = false;

    beforeAll(async () => {
      db = await createTestDatabase(setup.kind);
      queue = uniqueQueue('sample-shop');
      const config: SampleConfig = {
        port: 0,
        database: db.options,
        databaseLabel: DATABASE_LABEL[setup.kind],
        broker: setup.broker(await freePort(), queue),
      };
      app = await createSampleApp(config, { logger: ['error'] });
      await app.startAllMicroservices();
      await app.listen(0, '127.0.0.1');
      baseUrl = await app.getUrl();
      http = () => request(app.getHttpServer());
    });

    afterAll(async () => {
      if (!closed) await app?.close();
      await db?.drop();
      if (setup.transport === 'RabbitMQ') await withChannel((channel) => channel.deleteQueue(queue));
    });

    const customer = async (id: string) => (await http().get(`/customers/${id}`).expect(200)).body;
    const deliveries = async (messageId: string) =>
      (await http().get('/deliveries').query({ messageId }).expect(200)).body as any[];
    const eventIdOf = async (orderId: string) =>
      (await app.get(DataSource).getRepository(Order).findOneByOrFail({ id: orderId })).eventId!;
    const expectProblem = (res: request.Response, status: number) => {
      expect(res.status).toBe(status);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ type: expect.any(String), title: expect.any(String), status });
      expect(typeof res.body.detail).toBe('string');
    };

    describe('case 1: POST /payments — a retried payment is charged once', () => {
      const body = { reference: 'inv-1', amount: 4200 };

      it('charges once, replays the receipt to a retry, and counts one charge row', async () => {
        const first = await http().post('/payments').set('Idempotency-Key', 'pay-1').send(body).expect(201);
        expect(first.body).toEqual({ receipt: 'receipt-inv-1', reference: 'inv-1', amount: 4200 });
        expect(first.headers['idempotent-replayed']).toBeUndefined();
        const retry = await http().post('/payments').set('Idempotency-Key', 'pay-1').send(body).expect(201);
        expect(retry.body).toEqual(first.body);
        expect(retry.headers['idempotent-replayed']).toBe('true');
        expect((await http().get('/payments/inv-1').expect(200)).body).toEqual({ reference: 'inv-1', charges: 1 });
      });

      it('answers 422 problem+json to the same key with a different body, and charges nothing', async () => {
        const res = await http()
          .post('/payments')
          .set('Idempotency-Key', 'pay-1')
          .send({ ...body, amount: 9900 });
        expectProblem(res, 422);
        expect((await http().get('/payments/inv-1').expect(200)).body.charges).toBe(1);
      });

      it('records one charge for concurrent duplicates; the others are replays or 409s, never 5xx', async () => {
        const dup = { reference: 'inv-concurrent', amount: 100 };
        const replies = await Promise.all(
          Array.from({ length: 12 }, () => http().post('/payments').set('Idempotency-Key', 'pay-concurrent').send(dup)),
        );
        for (const res of replies) {
          expect([201, 409]).toContain(res.status);
          if (res.status === 201)
            expect(res.body).toEqual({ receipt: 'receipt-inv-concurrent', reference: 'inv-concurrent', amount: 100 });
          else expect(res.headers['retry-after']).toBeDefined();
        }
        expect(replies.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] !== 'true')).toHaveLength(1);
        expect((await http().get('/payments/inv-concurrent').expect(200)).body.charges).toBe(1);
      });

      it('a new key is a new payment', async () => {
        await http().post('/payments').set('Idempotency-Key', 'pay-2').send(body).expect(201);
        expect((await http().get('/payments/inv-1').expect(200)).body.charges).toBe(2);
      });

      it('requires the Idempotency-Key header (400 problem+json)', async () => {
        expectProblem(await http().post('/payments').send({ reference: 'inv-nokey', amount: 1 }), 400);
        expect((await http().get('/payments/inv-nokey').expect(200)).body.charges).toBe(0);
      });

      it.each([
        ['a missing amount', { reference: 'inv-bad' }],
        ['a fractional amount', { reference: 'inv-bad', amount: 1.5 }],
        ['a string amount', { reference: 'inv-bad', amount: '10' }],
        ['an empty reference', { reference: '', amount: 10 }],
        ['an unknown field', { reference: 'inv-bad', amount: 10, coupon: 'FREE' }],
      ])(
        'refuses %s with 400 problem+json naming the field; a fixed retry with the same key succeeds',
        async (_label, bad) => {
          const key = `pay-bad-${_label}`;
          const res = await http().post('/payments').set('Idempotency-Key', key).send(bad);
          expectProblem(res, 400);
          expect(res.body.errors.length).toBeGreaterThan(0);
          expect((await http().get('/payments/inv-bad').expect(200)).body.charges).toBe(0);
          await http()
            .post('/payments')
            .set('Idempotency-Key', key)
            .send({ reference: 'inv-fixed', amount: 10 })
            .expect(201);
        },
      );

      it('answers malformed JSON with 400 problem+json, not 500', async () => {
        const res = await http()
          .post('/payments')
          .set('Idempotency-Key', 'pay-malformed')
          .set('Content-Type', 'application/json')
          .send('{"reference": "inv-x", "amount": ');
        expectProblem(res, 400);
        expect(res.body.detail).toMatch(/not valid JSON.*Content-Type: application\/json/);
      });

      it('GET /payments/:reference of an unknown payment → 0 charges', async () => {
        expect((await http().get('/payments/never-paid').expect(200)).body).toEqual({
          reference: 'never-paid',
          charges: 0,
        });
      });
    });

    describe('cases 2 and 3: POST /orders, the OrderPlaced consumer, GET /customers/:id', () => {
      it('GET /customers/:id of a customer with no orders → zeros', async () => {
        expect(await customer('nobody')).toEqual({ id: 'nobody', orders: 0, totalSpent: 0 });
      });

      it('PUT /customers/:id/hold with an id over 100 characters → 400 problem+json, nothing written', async () => {
        const long = 'c'.repeat(101);
        const res = await http().put(`/customers/${long}/hold`).expect(400);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(res.body.detail).toMatch(/at most 100 characters \(got 101\)/);
        const totals = app.get(DataSource).getRepository(CustomerTotals);
        expect(await totals.countBy({ id: long })).toBe(0);
        await http().put('/customers/held-then-released/hold').expect(204);
        expect((await totals.findOneByOrFail({ id: 'held-then-released' })).onHold).toBe(true);
        await http().delete('/customers/held-then-released/hold').expect(204);
        expect((await totals.findOneByOrFail({ id: 'held-then-released' })).onHold).toBe(false);
      });

      it('saves the order with its event; the consumer applies it once; a retry replays and emits nothing', async () => {
        const body = { customerId: 'c-1', reference: 'ord-1', amount: 2500 };
        const placed = await http().post('/orders').set('Idempotency-Key', 'order-1').send(body).expect(201);
        expect(placed.body).toEqual({ id: expect.any(String), ...body });
        await waitFor(async () => (await customer('c-1')).orders === 1, 'the consumer to apply OrderPlaced');
        expect(await customer('c-1')).toEqual({ id: 'c-1', orders: 1, totalSpent: 2500 });

        const retry = await http().post('/orders').set('Idempotency-Key', 'order-1').send(body).expect(201);
        expect(retry.body).toEqual(placed.body);
        expect(retry.headers['idempotent-replayed']).toBe('true');
        expect(await app.get(DataSource).getRepository(Order).countBy({ customerId: 'c-1' })).toBe(1);

        // A second order, to have something after the retry that must arrive: the totals show exactly two.
        await http()
          .post('/orders')
          .set('Idempotency-Key', 'order-2')
          .send({ ...body, reference: 'ord-2', amount: 1000 })
          .expect(201);
        await waitFor(async () => (await customer('c-1')).orders === 2, 'the second order');
        expect(await customer('c-1')).toEqual({ id: 'c-1', orders: 2, totalSpent: 3500 });
        expectProblem(
          await http()
            .post('/orders')
            .set('Idempotency-Key', 'order-1')
            .send({ ...body, amount: 1 }),
          422,
        );
      });

      it("answers the README's two curl calls as it says: 201, then the same 201 replayed; one order, counted once", async () => {
        const calls = [
          ...readReadme().matchAll(
            /curl -i localhost:3000(\/\S+) -H 'Idempotency-Key: ([^']+)' -H 'Content-Type: application\/json' \\\s*-d '([^']+)'/g,
          ),
        ];
        expect(calls).toHaveLength(2);
        const [path, key, json] = calls[0].slice(1);
        expect(calls[1].slice(1)).toEqual([path, key, json]);
        const body = JSON.parse(json);
        // The README's key, apart from the other tests' keys of this app.
        const send = () => http().post(path).set('Idempotency-Key', `readme-${key}`).send(body).expect(201);
        const first = await send();
        const retry = await send();
        expect(first.headers['idempotent-replayed']).toBeUndefined();
        expect(retry.headers['idempotent-replayed']).toBe('true');
        expect(retry.body).toEqual(first.body);
        expect(await app.get(DataSource).getRepository(Order).countBy({ reference: body.reference })).toBe(1);
        await waitFor(async () => (await customer(body.customerId)).orders === 1, 'the consumer to apply OrderPlaced');
        const totals = await http().get(`/customers/${body.customerId}`).expect(200);
        expect(totals.body).toMatchObject({ orders: 1, totalSpent: body.amount });
      });

      it('rolls back the order and its event together when a later step of the transaction fails', async () => {
        const repo = app.get(DataSource).getRepository(Order);
        const res = await http()
          .post('/orders')
          .set('Idempotency-Key', 'order-big')
          .send({ customerId: 'c-2', reference: 'big', amount: CREDIT_LIMIT + 1 });
        expectProblem(res, 422);
        expect(await repo.countBy({ customerId: 'c-2' })).toBe(0);
        const outboxRows = await app.get(DataSource).query(`SELECT payload FROM outbox_messages`);
        expect(outboxRows.filter((r: { payload: string }) => JSON.parse(r.payload).customerId === 'c-2')).toHaveLength(
          0,
        );
        // The refusal is the key's outcome (replayErrors): a retry gets it again and writes nothing; the key is
        // kept for that request, so a corrected order takes a new key, and only that one arrives.
        const retried = await http()
          .post('/orders')
          .set('Idempotency-Key', 'order-big')
          .send({ customerId: 'c-2', reference: 'big', amount: CREDIT_LIMIT + 1 });
        expect(retried.status).toBe(422);
        expect(retried.headers['idempotent-replayed']).toBe('true');
        expect(await repo.countBy({ customerId: 'c-2' })).toBe(0);
        await http()
          .post('/orders')
          .set('Idempotency-Key', 'order-small')
          .send({ customerId: 'c-2', reference: 'small', amount: 10 })
          .expect(201);
        await waitFor(async () => (await customer('c-2')).orders === 1, 'the valid order');
        expect(await customer('c-2')).toEqual({ id: 'c-2', orders: 1, totalSpent: 10 });
      });

      it('concurrent duplicates of one order create one order and one event', async () => {
        const body = { customerId: 'c-3', reference: 'ord-c', amount: 700 };
        const replies = await Promise.all(
          Array.from({ length: 10 }, () => http().post('/orders').set('Idempotency-Key', 'order-c').send(body)),
        );
        for (const res of replies) expect([201, 409]).toContain(res.status);
        const ids = new Set(replies.filter((r) => r.status === 201).map((r) => r.body.id));
        expect(ids.size).toBe(1);
        expect(await app.get(DataSource).getRepository(Order).countBy({ customerId: 'c-3' })).toBe(1);
        await waitFor(async () => (await customer('c-3')).orders === 1, 'the order to arrive');
        const [orderId] = ids;
        await waitFor(
          async () => (await deliveries(await eventIdOf(orderId))).length === 1,
          'the delivery to be logged',
        );
        expect(await customer('c-3')).toEqual({ id: 'c-3', orders: 1, totalSpent: 700 });
      });

      it('a forced redelivery of OrderPlaced (same message id, through the broker client) leaves the totals unchanged', async () => {
        const placed = await http()
          .post('/orders')
          .set('Idempotency-Key', 'order-r')
          .send({ customerId: 'c-4', reference: 'ord-r', amount: 900 })
          .expect(201);
        await waitFor(async () => (await customer('c-4')).orders === 1, 'the first delivery');
        const messageId = await eventIdOf(placed.body.id);
        await waitFor(async () => (await deliveries(messageId)).length === 1, 'the first delivery to be logged');

        const payload = { orderId: placed.body.id, customerId: 'c-4', amount: 900 };
        await setup.redeliver(app.get<ClientProxy>(BROKER), messageId, payload);
        await setup.redeliver(app.get<ClientProxy>(BROKER), messageId, payload);
        await waitFor(
          async () => (await deliveries(messageId)).length === 3,
          'both redeliveries to reach the consumer',
        );
        expect((await deliveries(messageId)).map((d) => d.outcome)).toEqual([
          'applied',
          'skipped: already applied',
          'skipped: already applied',
        ]);
        expect(await customer('c-4')).toEqual({ id: 'c-4', orders: 1, totalSpent: 900 });
      });

      it('POST /orders/:id/redeliver publishes the same message id again through the outbox; the consumer skips it', async () => {
        const placed = await http()
          .post('/orders')
          .set('Idempotency-Key', 'order-s')
          .send({ customerId: 'c-5', reference: 'ord-s', amount: 300 })
          .expect(201);
        await waitFor(async () => (await customer('c-5')).orders === 1, 'the first delivery');
        const res = await http().post(`/orders/${placed.body.id}/redeliver`).expect(202);
        expect(res.body).toEqual({ orderId: placed.body.id, messageId: await eventIdOf(placed.body.id) });
        await waitFor(async () => (await deliveries(res.body.messageId)).length === 2, 'the redelivery');
        expect((await deliveries(res.body.messageId)).map((d) => d.outcome)).toEqual([
          'applied',
          'skipped: already applied',
        ]);
        expect(await customer('c-5')).toEqual({ id: 'c-5', orders: 1, totalSpent: 300 });
        expectProblem(await http().post('/orders/no-such-order/redeliver'), 404);
      });

      it('validates the order body (400 problem+json) and writes nothing', async () => {
        for (const [i, bad] of [
          {},
          { customerId: 'c-6', reference: 'r', amount: 0 },
          { customerId: 7, reference: 'r', amount: 5 },
        ].entries()) {
          expectProblem(await http().post('/orders').set('Idempotency-Key', `order-bad-${i}`).send(bad), 400);
        }
        expect(await app.get(DataSource).getRepository(Order).countBy({ customerId: 'c-6' })).toBe(0);
        expectProblem(await http().post('/orders').send({ customerId: 'c-6', reference: 'r', amount: 5 }), 400);
      });
    });

    describe('case 4: POST /signups — a retried sign-up gets the same account', () => {
      it('returns the same account to a retry, refuses a different key for the same email, validates the email', async () => {
        const first = await http()
          .post('/signups')
          .set('Idempotency-Key', 'su-1')
          .send({ email: 'ada@example.com' })
          .expect(201);
        expect(first.body).toEqual({ id: expect.any(String), email: 'ada@example.com' });
        const retries = await Promise.all(
          Array.from({ length: 5 }, () =>
            http().post('/signups').set('Idempotency-Key', 'su-1').send({ email: 'ada@example.com' }),
          ),
        );
        for (const res of retries) {
          expect(res.status).toBe(201);
          expect(res.body).toEqual(first.body);
        }
        expectProblem(
          await http().post('/signups').set('Idempotency-Key', 'su-2').send({ email: 'ada@example.com' }),
          409,
        );
        expectProblem(
          await http().post('/signups').set('Idempotency-Key', 'su-1').send({ email: 'other@example.com' }),
          422,
        );
        expectProblem(
          await http().post('/signups').set('Idempotency-Key', 'su-3').send({ email: 'not-an-email' }),
          400,
        );
        const accounts = await app.get(DataSource).query('SELECT COUNT(*) AS n FROM shop_accounts');
        expect(Number(accounts[0].n)).toBe(1);
      });

      it('records one welcome e-mail per account, after the commit, through the in-process handler', async () => {
        const { body } = await http()
          .post('/signups')
          .set('Idempotency-Key', 'su-welcome')
          .send({ email: 'grace@example.com' })
          .expect(201);
        await http().post('/signups').set('Idempotency-Key', 'su-welcome').send({ email: 'grace@example.com' });
        const emails = () => app.get(DataSource).getRepository(WelcomeEmail).findBy({ email: 'grace@example.com' });
        await waitFor(async () => (await emails()).length > 0, 'the welcome e-mail');
        await app.get(OutboxService).flush();
        expect((await emails()).map((e) => e.accountId)).toEqual([body.id]);
      });
    });

    it('GET /outbox reports the outbox state; every event gets published', async () => {
      await waitFor(async () => (await http().get('/outbox')).body.pending === 0, 'the outbox to drain');
      const stats = (await http().get('/outbox').expect(200)).body;
      expect(stats).toMatchObject({ pending: 0, dead: 0 });
    });

    it('npm run sample:demo prints the four cases and a requeued dead letter against this sample', async () => {
      const lines: string[] = [];
      await runDemo(baseUrl, (line) => lines.push(line));
      const text = lines.join('\n');
      expect(text).toMatch(/1\. A retried payment must not charge twice/);
      expect(text).toMatch(/applied, charged once/);
      expect(text).toMatch(/replayed \(Idempotent-Replayed: true\)/);
      expect(text).toMatch(/charges: 1\n/);
      expect(text).toMatch(/already applied and skipped/);
      expect(text).toMatch(/orders 2, totalSpent 6500 \(unchanged\)/);
      expect(text).toMatch(/a new key for the same email → 409/);
      expect(text).toMatch(
        /trace of pay-\w+ \(GET \/console\/api\/trace\): request completed, HTTP 201\n\s+emitted no message/,
      );
      expect(text).toMatch(
        /trace of order-1-\w+ \(GET \/console\/api\/trace\): request completed, HTTP 201\n\s+OrderPlaced \S+: sent; applied by (?!no consumer)\S+/,
      );
      // 5: a consumer that cannot apply a message (its customer on hold): dead at once, tried, requeued, applied once.
      expect(text).toMatch(/PUT \/customers\/held-\w+\/hold → 204/);
      expect(text).toMatch(
        /OrderPlaced \S+ at consumer:OrderPlacedConsumer\.onOrderPlaced: dead after 1 attempt, not retried: .*is on hold/,
      );
      expect(text).toMatch(/POST \/console\/api\/dry-run .* → 1 of 1 would succeed/);
      expect(text).toMatch(/POST \/console\/api\/requeue → 1 requeued/);
      expect(text).toMatch(/GET \/customers\/held-\w+ → orders 1, totalSpent 1200: applied once/);
      expect(text).not.toMatch(/CHANGED|NOT marked/);
      // Nothing left dead or pending once the requeued message is applied.
      await waitFor(async () => (await http().get('/outbox')).body.pending === 0, 'the outbox to drain');
      expect((await http().get('/outbox')).body).toMatchObject({ pending: 0, dead: 0 });
    });

    if (setup.transport === 'RabbitMQ') {
      it('acknowledged every delivery after its transaction (duplicates too): after shutdown the queue is empty', async () => {
        await app.close(); // unacknowledged messages go back to the queue when the consumer's channel closes
        closed = true;
        const { messageCount } = await withChannel((channel) => channel.checkQueue(queue));
        expect(messageCount).toBe(0);
      });
    }
  });
}

async function withChannel<T>(work: (channel: import('amqplib').Channel) => Promise<T>): Promise<T> {
  const connection = await connect(RABBITMQ_URL);
  try {
    return await work(await connection.createChannel());
  } finally {
    await connection.close();
  }
}
