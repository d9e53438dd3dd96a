import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { OutboxConfigurationError, OutboxDeadLetters, OutboxMessage, OutboxService } from '../src';
import { OutboxConsoleModule } from '../src/console/outbox-console.module';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { uniqueQueue } from './helpers/consumers';
import { CONSOLE_TOKEN, FailingSerializer, startConsoleApp, TokenGuard } from './helpers/console-app';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

const AUTH = { 'x-console-token': CONSOLE_TOKEN };
const SAME_SITE = { ...AUTH, 'x-outbox-console': '1', 'content-type': 'application/json' };
const HOSTILE = '<script>alert("pwned")</script>';

describe('OutboxConsoleModule.forRoot() showStoredResponses', () => {
  it('is off by default and takes only a boolean', () => {
    expect(() => OutboxConsoleModule.forRoot({ guard: TokenGuard, showStoredResponses: true })).not.toThrow();
    expect(() => OutboxConsoleModule.forRoot({ guard: TokenGuard, showStoredResponses: 'yes' as never })).toThrow(
      OutboxConfigurationError,
    );
    expect(() => OutboxConsoleModule.forRoot({ guard: TokenGuard, showStoredResponses: 1 as never })).toThrow(
      /showStoredResponses/,
    );
  });
});

for (const kind of ['postgres', 'mariadb', 'sqlite'] as DatabaseKind[]) {
  // One database shows stored responses (the opt-in); the others keep the default.
  const showStoredResponses = kind === 'sqlite';
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `Outbox console: failure groups, pending rows and keys on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let recorder: AmqpRecorder;
      const serializer = new FailingSerializer();
      const queue = uniqueQueue('outbox-console-ops');
      const http = () => request(app.getHttpServer());

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        recorder = await new AmqpRecorder(queue).start();
        app = await startConsoleApp({
          db,
          queue,
          serializer,
          console: { guard: TokenGuard, sampleInterval: 250, showStoredResponses },
        });
        const outbox = app.get(OutboxService);
        await outbox.transaction(async () => {
          for (let n = 1; n <= 4; n++) await outbox.emit('Order', { fail: `order ${n} refused`, n });
          for (let n = 1; n <= 2; n++) await outbox.emit('Invoice', { fail: `invoice '${HOSTILE}${n}' rejected` });
          // Not due for an hour: stays pending.
          await outbox.emit('Reminder', { n: 1 }, { key: HOSTILE, delay: 3_600_000 });
        });
        await waitFor(async () => (await outbox.stats()).dead === 6, 'six messages to go dead');
        const ds = app.get(DataSource);
        // A row a publish pass holds the lease of (another replica, mid-publish).
        await ds.getRepository(OutboxMessage).insert({
          messageId: 'in-flight-1',
          pattern: 'Shipment',
          payload: '{}',
          key: 'ship-1',
          status: 'pending',
          attempts: 1,
          availableAt: new Date(),
          createdAt: new Date(Date.now() - 5000),
          claimedBy: 'owner-token-of-replica-b',
          claimedUntil: new Date(Date.now() + 3_600_000),
        } as never);
        await ds.getRepository(IdempotencyRecord).insert([
          {
            scope: 'POST /payments',
            key: 'pay-42',
            fingerprint: 'f'.repeat(64),
            responseStatus: 201,
            responseBody: '{"card":"4111","password":"hunter2-in-body"}',
            responseHeaders: '{"x-api-key":"hunter2-header"}',
            createdAt: new Date(Date.now() - 1000),
            expiresAt: new Date(Date.now() + 86_400_000),
          },
          {
            scope: 'POST /refunds',
            key: 'pay-42',
            fingerprint: 'e'.repeat(64),
            responseStatus: null,
            responseBody: null,
            responseHeaders: null,
            createdAt: new Date(),
            expiresAt: new Date(Date.now() + 86_400_000),
          },
        ] as never);
      }, 60_000);

      afterAll(async () => {
        await app?.close();
        await recorder?.stop();
        await db?.drop();
      });

      it(`refuses the new views without the guard's credentials (${DATABASE_LABEL[kind]})`, async () => {
        for (const path of ['dead-letters/groups', 'pending', 'keys?key=pay-42']) {
          const missing = await http().get(`/outbox-console/api/${path}`);
          expect([path, missing.status]).toEqual([path, 401]);
          const wrong = await http().get(`/outbox-console/api/${path}`).set('x-console-token', 'wrong');
          expect([path, wrong.status]).toEqual([path, 403]);
        }
        const { body } = await http().get('/outbox-console/api/dead-letters/groups').set(AUTH).expect(200);
        const purge = await http()
          .post('/outbox-console/api/purge')
          .set({ ...SAME_SITE, 'x-console-token': 'wrong' })
          .send({ filter: { group: body.groups[0].group } });
        expect(purge.status).toBe(403);
        expect(await app.get(OutboxDeadLetters).count()).toBe(6);
      });

      it(`lists failure groups and requeues one group only (${DATABASE_LABEL[kind]})`, async () => {
        const { body } = await http().get('/outbox-console/api/dead-letters/groups').set(AUTH).expect(200);
        expect(body.complete).toBe(true);
        expect(body.groups.map((g: { count: number; patterns: string[] }) => [g.count, g.patterns])).toEqual([
          [4, ['Order']],
          [2, ['Invoice']],
        ]);
        const [orders, invoices] = body.groups;
        expect(orders).toMatchObject({ errorClass: 'OutboxNonRetryableError', frame: null });
        expect(orders.message).toMatch(/^order <n> refused: refused by amqp:\/\/\*\*\*@broker\.internal:<n>/);
        expect(JSON.stringify(body)).not.toContain('hunter2');
        const count = await http()
          .get(`/outbox-console/api/dead-letters/count?group=${invoices.group}`)
          .set(AUTH)
          .expect(200);
        expect(count.body).toEqual({ count: 2 });
        const page = await http().get(`/outbox-console/api/dead-letters?group=${invoices.group}`).set(AUTH).expect(200);
        expect(page.body.items.map((m: { pattern: string }) => m.pattern)).toEqual(['Invoice', 'Invoice']);

        serializer.failing = false;
        try {
          const requeued = await http()
            .post('/outbox-console/api/requeue')
            .set(SAME_SITE)
            .send({ filter: { group: invoices.group } })
            .expect(200);
          expect(requeued.body).toEqual({ count: 2 });
          await waitFor(() => recorder.distinct().size >= 2, 'the requeued invoices on RabbitMQ');
        } finally {
          serializer.failing = true;
        }
        expect(await app.get(OutboxDeadLetters).count()).toBe(4);
        expect(await app.get(OutboxDeadLetters).count({ group: orders.group })).toBe(4);

        for (const bad of ['group=xyz', 'limit=0', 'colour=red', `group=${orders.group}`]) {
          const res = await http().get(`/outbox-console/api/dead-letters/groups?${bad}`).set(AUTH);
          expect([bad, res.status]).toEqual([bad, 400]);
          expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        }
        const badRequeue = await http()
          .post('/outbox-console/api/requeue')
          .set(SAME_SITE)
          .send({ filter: { group: 'not-hex' } });
        expect(badRequeue.status).toBe(400);
        expect(badRequeue.body.detail).toMatch(/16 hex digits/);
      });

      it(`lists pending and in-flight rows, read-only and paged (${DATABASE_LABEL[kind]})`, async () => {
        const all = await http().get('/outbox-console/api/pending').set(AUTH).expect(200);
        expect(
          all.body.items.map((m: { pattern: string; state: string; key: string }) => [m.pattern, m.state, m.key]),
        ).toEqual([
          ['Reminder', 'pending', HOSTILE],
          ['Shipment', 'in-flight', 'ship-1'],
        ]);
        const [reminder, shipment] = all.body.items;
        expect(reminder).toMatchObject({ leaseOwner: null, leaseUntil: null, attempts: 0 });
        expect(shipment).toMatchObject({ leaseOwner: 'owner-token-of-replica-b', attempts: 1 });
        expect(shipment.ageMs).toBeGreaterThanOrEqual(5000);
        expect(reminder).not.toHaveProperty('payload');

        const inFlight = await http().get('/outbox-console/api/pending?state=in-flight').set(AUTH).expect(200);
        expect(inFlight.body.items.map((m: { messageId: string }) => m.messageId)).toEqual(['in-flight-1']);
        const byKey = await http().get('/outbox-console/api/pending').query({ key: HOSTILE }).set(AUTH).expect(200);
        expect(byKey.body.items.map((m: { pattern: string }) => m.pattern)).toEqual(['Reminder']);
        const first = await http().get('/outbox-console/api/pending?limit=1').set(AUTH).expect(200);
        expect(first.body.items).toHaveLength(1);
        const second = await http()
          .get(`/outbox-console/api/pending?limit=1&cursor=${first.body.nextCursor}`)
          .set(AUTH)
          .expect(200);
        expect(second.body).toMatchObject({ items: [{ messageId: 'in-flight-1' }], nextCursor: null });

        for (const bad of ['state=sent', 'limit=9999', 'cursor=zzz', 'status=dead']) {
          const res = await http().get(`/outbox-console/api/pending?${bad}`).set(AUTH);
          expect([bad, res.status]).toEqual([bad, 400]);
          expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        }
      });

      it(`looks up an idempotency key in every scope, without stored responses unless opted in (${DATABASE_LABEL[kind]})`, async () => {
        const { body } = await http().get('/outbox-console/api/keys?key=pay-42').set(AUTH).expect(200);
        expect(
          body.records.map((r: { scope: string; state: string; responseStatus: number | null }) => [
            r.scope,
            r.state,
            r.responseStatus,
          ]),
        ).toEqual([
          ['POST /refunds', 'in-progress', null],
          ['POST /payments', 'completed', 201],
        ]);
        const payments = body.records[1];
        if (showStoredResponses) {
          expect(JSON.parse(payments.responseBody)).toEqual({ card: '4111', password: '***' });
          expect(JSON.parse(payments.responseHeaders)).toEqual({ 'x-api-key': '***' });
        } else {
          expect(payments).not.toHaveProperty('responseBody');
          expect(payments).not.toHaveProperty('responseHeaders');
        }
        expect(JSON.stringify(body)).not.toContain('hunter2');
        const scoped = await http()
          .get('/outbox-console/api/keys')
          .query({ key: 'pay-42', scope: 'POST /payments' })
          .set(AUTH)
          .expect(200);
        expect(scoped.body.records).toHaveLength(1);
        // Pasted as the header carried it, in RFC 8941 quotes: the same records.
        const quoted = await http().get('/outbox-console/api/keys').query({ key: '"pay-42"' }).set(AUTH).expect(200);
        expect(quoted.body.records).toHaveLength(2);
        const none = await http().get('/outbox-console/api/keys?key=never-sent').set(AUTH).expect(200);
        expect(none.body).toEqual({ records: [] });
        for (const bad of ['', 'key=', 'key=a&tenant=b']) {
          const res = await http().get(`/outbox-console/api/keys?${bad}`).set(AUTH);
          expect([bad, res.status]).toEqual([bad, 400]);
          expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        }
      });
    },
  );
}
