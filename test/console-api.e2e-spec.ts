import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { OutboxConfigurationError, OutboxDeadLetters, OutboxService } from '../src';
import { OutboxConsoleModule } from '../src/console/outbox-console.module';
import { OutboxConsoleUnguardedError } from '../src/errors';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { uniqueQueue } from './helpers/consumers';
import { BROKER_SECRET, CONSOLE_TOKEN, FailingSerializer, startConsoleApp } from './helpers/console-app';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

const AUTH = { 'x-console-token': CONSOLE_TOKEN };
/** What the console page sends with a state-changing call. */
const SAME_SITE = { ...AUTH, 'x-outbox-console': '1', 'content-type': 'application/json' };

describe('OutboxConsoleModule.forRoot() options', () => {
  it('refuses to mount without a guard, naming the fix', () => {
    expect(() => OutboxConsoleModule.forRoot({})).toThrow(OutboxConsoleUnguardedError);
    expect(() => OutboxConsoleModule.forRoot({})).toThrow(/guard.*allowUnguarded: true/s);
    expect(() => OutboxConsoleModule.forRoot({ allowUnguarded: false } as never)).toThrow(OutboxConsoleUnguardedError);
  });

  it('refuses bad options with OutboxConfigurationError', () => {
    expect(() => OutboxConsoleModule.forRoot({ allowUnguarded: true, path: '../x' })).toThrow(OutboxConfigurationError);
    expect(() => OutboxConsoleModule.forRoot({ allowUnguarded: true, sampleInterval: 10 })).toThrow(/sampleInterval/);
    expect(() => OutboxConsoleModule.forRoot({ guard: {} as never })).toThrow(/canActivate/);
    expect(() => OutboxConsoleModule.forRoot({ allowUnguarded: true, paht: 'x' } as never)).toThrow(/paht/);
  });
});

const cases: Array<{ kind: DatabaseKind; platform: 'express' | 'fastify' }> = [
  { kind: 'postgres', platform: 'express' },
  { kind: 'postgres', platform: 'fastify' },
  { kind: 'mariadb', platform: 'express' },
  { kind: 'sqlite', platform: 'fastify' },
];

for (const { kind, platform } of cases) {
  describeWith([...servicesOf(kind), 'rabbitmq'], `Outbox console API on ${DATABASE_LABEL[kind]} (${platform})`, () => {
    let db: TestDatabase;
    let app: INestApplication;
    let recorder: AmqpRecorder;
    const serializer = new FailingSerializer();
    const queue = uniqueQueue('outbox-console');
    const ids: Record<'a1' | 'a2' | 'a3' | 'b1' | 'b2', string> = {} as never;
    const http = () => request(app.getHttpServer());

    beforeAll(async () => {
      db = await createTestDatabase(kind);
      recorder = await new AmqpRecorder(queue).start();
      app = await startConsoleApp({ db, queue, serializer, platform });
      const outbox = app.get(OutboxService);
      await outbox.transaction(async () => {
        const headers = { 'x-db-password': 'hunter2-header-secret', 'x-trace': 'visible' };
        ids.a1 = await outbox.emit('A', { fail: 'boom', n: 1 }, { key: 'k1', headers });
        ids.a2 = await outbox.emit('A', { fail: 'boom', n: 2 }, { key: 'k2' });
        ids.a3 = await outbox.emit('A', { fail: 'boom', n: 3 }, { key: 'k3' });
        ids.b1 = await outbox.emit('B', { fail: 'bang', n: 4 }, { key: 'k4' });
        ids.b2 = await outbox.emit('B', { fail: 'bang', n: 5 }, { key: 'k5' });
      });
      await waitFor(async () => (await outbox.stats()).dead === 5, 'five messages to go dead');
    });

    afterAll(async () => {
      await app?.close();
      await recorder?.stop();
      await db?.drop();
    });

    it(`refuses a request without the guard's credentials (${DATABASE_LABEL[kind]})`, async () => {
      const missing = await http().get('/outbox-console/api/summary');
      expect(missing.status).toBe(401);
      expect(missing.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect((await http().get('/outbox-console/api/summary').set('x-console-token', 'wrong')).status).toBe(403);
      expect((await http().get('/outbox-console')).status).toBe(401);
      expect(
        (
          await http()
            .post('/outbox-console/api/purge')
            .set({ ...SAME_SITE, 'x-console-token': 'wrong' })
            .send({ filter: {} })
        ).status,
      ).toBe(403);
      expect(await app.get(OutboxDeadLetters).count()).toBe(5);
    });

    it(`serves the page with a strict CSP, its script and its stylesheet (${DATABASE_LABEL[kind]})`, async () => {
      const page = await http().get('/outbox-console').set(AUTH);
      expect(page.status).toBe(200);
      expect(page.headers['content-type']).toMatch(/^text\/html/);
      expect(page.headers['content-security-policy']).toContain("script-src 'self'");
      expect(page.headers['content-security-policy']).not.toContain('unsafe-inline');
      expect(page.text).toContain('<script src="/outbox-console/app.js"></script>');
      const script = await http().get('/outbox-console/app.js').set(AUTH);
      expect(script.headers['content-type']).toMatch(/^text\/javascript/);
      expect(script.text).toContain('X-Outbox-Console');
      expect((await http().get('/outbox-console/app.css').set(AUTH)).headers['content-type']).toMatch(/^text\/css/);
    });

    it(`summary counts the backlog and the dead (${DATABASE_LABEL[kind]})`, async () => {
      const res = await http().get('/outbox-console/api/summary').set(AUTH).expect(200);
      expect(res.body).toMatchObject({ pending: 0, due: 0, inFlight: 0, dead: 5, oldestPendingAgeMs: 0 });
    });

    it(`lists dead letters by filter and pages with the cursor (${DATABASE_LABEL[kind]})`, async () => {
      const byPattern = await http().get('/outbox-console/api/dead-letters?pattern=A').set(AUTH).expect(200);
      expect(byPattern.body.items.map((m: { messageId: string }) => m.messageId).sort()).toEqual(
        [ids.a1, ids.a2, ids.a3].sort(),
      );
      const byError = await http().get('/outbox-console/api/dead-letters?errorContains=BANG').set(AUTH).expect(200);
      expect(byError.body.items.map((m: { messageId: string }) => m.messageId).sort()).toEqual([ids.b1, ids.b2].sort());
      const byKey = await http().get('/outbox-console/api/dead-letters?key=k2').set(AUTH).expect(200);
      expect(byKey.body.items.map((m: { messageId: string }) => m.messageId)).toEqual([ids.a2]);
      const future = await http()
        .get(`/outbox-console/api/dead-letters?deadSince=${Date.now() + 3_600_000}`)
        .set(AUTH)
        .expect(200);
      expect(future.body.items).toEqual([]);

      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const res: request.Response = await http()
          .get('/outbox-console/api/dead-letters')
          .query({ limit: 2, ...(cursor ? { cursor } : {}) })
          .set(AUTH)
          .expect(200);
        expect(res.body.items.length).toBeLessThanOrEqual(2);
        seen.push(...res.body.items.map((m: { messageId: string }) => m.messageId));
        cursor = res.body.nextCursor;
      } while (cursor);
      expect(seen.sort()).toEqual(Object.values(ids).sort());

      const count = await http().get('/outbox-console/api/dead-letters/count?pattern=B').set(AUTH).expect(200);
      expect(count.body).toEqual({ count: 2 });
      for (const bad of ['cursor=not-a-cursor', 'deadSince=yesterday', 'limit=0', 'colour=red']) {
        const res = await http().get(`/outbox-console/api/dead-letters?${bad}`).set(AUTH);
        expect([bad, res.status]).toEqual([bad, 400]);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(res.body).toMatchObject({ status: 400, title: 'Bad request' });
      }
      expect((await http().get('/outbox-console/api/series?minutes=0').set(AUTH)).status).toBe(400);
    });

    it(`shows one message: payload, headers, attempt history, secrets redacted (${DATABASE_LABEL[kind]})`, async () => {
      const res = await http().get(`/outbox-console/api/messages/${ids.a1}`).set(AUTH).expect(200);
      expect(res.body).toMatchObject({ messageId: ids.a1, pattern: 'A', key: 'k1', status: 'dead', attempts: 1 });
      expect(JSON.parse(res.body.payload)).toEqual({ fail: 'boom', n: 1 });
      expect(res.body.headers).toMatchObject({ 'x-db-password': '***', 'x-trace': 'visible' });
      expect(res.body.history).toHaveLength(1);
      expect(res.body.history[0].error).toContain('amqp://***@broker.internal:5672');
      expect(res.text).not.toContain(BROKER_SECRET);
      expect(res.text).not.toContain('hunter2-header-secret');
      const missing = await http().get('/outbox-console/api/messages/no-such-id').set(AUTH);
      expect(missing.status).toBe(404);
      expect(missing.headers['content-type']).toMatch(/^application\/problem\+json/);
    });

    it(`refuses cross-site state-changing calls and changes nothing (${DATABASE_LABEL[kind]})`, async () => {
      const body = { filter: {} };
      const refused = [
        await http()
          .post('/outbox-console/api/purge')
          .set({ ...AUTH, 'content-type': 'application/json' })
          .send(body),
        await http()
          .post('/outbox-console/api/purge')
          .set({ ...SAME_SITE, 'sec-fetch-site': 'cross-site' })
          .send(body),
        await http()
          .post('/outbox-console/api/requeue')
          .set({ ...SAME_SITE, origin: 'https://evil.example' })
          .send(body),
      ];
      for (const res of refused) {
        expect(res.status).toBe(403);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(res.body).toMatchObject({ status: 403, title: 'Cross-site request refused' });
      }
      const form = await http()
        .post('/outbox-console/api/purge')
        .set({ ...AUTH, 'x-outbox-console': '1', 'content-type': 'application/x-www-form-urlencoded' })
        .send('filter=x');
      expect(form.status).toBe(415);
      const empty = await http().post('/outbox-console/api/purge').set(SAME_SITE).send({});
      expect(empty.status).toBe(400);
      const typo = await http()
        .post('/outbox-console/api/purge')
        .set(SAME_SITE)
        .send({ filter: { patern: 'A' } });
      expect(typo.status).toBe(400);
      expect(await app.get(OutboxDeadLetters).count()).toBe(5);
    });

    it(`requeue by filter touches exactly the matching rows; purge by id one (${DATABASE_LABEL[kind]})`, async () => {
      serializer.failing = false;
      const res = await http()
        .post('/outbox-console/api/requeue')
        .set({ ...SAME_SITE, 'sec-fetch-site': 'same-origin' })
        .send({ filter: { pattern: 'B', errorContains: 'bang' } });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ count: 2 });
      await waitFor(() => recorder.distinct().size === 2, 'the two requeued messages to be delivered');
      expect([...recorder.distinct()].sort()).toEqual([ids.b1, ids.b2].sort());
      const left = await http().get('/outbox-console/api/dead-letters').set(AUTH).expect(200);
      expect(left.body.items.map((m: { messageId: string }) => m.messageId).sort()).toEqual(
        [ids.a1, ids.a2, ids.a3].sort(),
      );

      const purge = await http()
        .post('/outbox-console/api/purge')
        .set(SAME_SITE)
        .send({ ids: [ids.a2] });
      expect(purge.body).toEqual({ count: 1 });
      expect((await http().get(`/outbox-console/api/messages/${ids.a2}`).set(AUTH)).status).toBe(404);
      expect(await app.get(OutboxDeadLetters).count()).toBe(2);
    });

    it(`the series counts what the publisher published (${DATABASE_LABEL[kind]})`, async () => {
      const published = async () => {
        const res = await http().get('/outbox-console/api/series?minutes=5').set(AUTH).expect(200);
        return (res.body.samples as Array<{ published: number }>).reduce((sum, s) => sum + s.published, 0);
      };
      await waitFor(async () => (await published()) === 2, 'the sampler to count the two published messages');
      // The newest sample may predate the purge of the test before (one sample every 250 ms): wait for the next.
      const newest = async () => (await http().get('/outbox-console/api/series').set(AUTH).expect(200)).body;
      await waitFor(async () => (await newest()).samples.at(-1)?.dead === 2, 'a sample taken after the purge');
      const res = await newest();
      expect(res).toMatchObject({ sampleInterval: 250, minutes: 15 });
      expect(res.samples.at(-1)).toMatchObject({ dead: 2, pending: 0 });
    });
  });
}

describeWith(['postgres', 'rabbitmq'], 'Outbox console mounted with allowUnguarded on PostgreSQL', () => {
  let db: TestDatabase;
  let app: INestApplication;
  beforeAll(async () => {
    db = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('starts, under its own path, and answers without credentials', async () => {
    app = await startConsoleApp({
      db,
      queue: uniqueQueue('outbox-console-open'),
      serializer: new FailingSerializer(),
      console: { allowUnguarded: true, path: '/ops/outbox/' },
    });
    const res = await request(app.getHttpServer()).get('/ops/outbox/api/summary').expect(200);
    expect(res.body).toMatchObject({ dead: 0, pending: 0 });
    expect((await request(app.getHttpServer()).get('/outbox-console/api/summary')).status).toBe(404);
  });
});
