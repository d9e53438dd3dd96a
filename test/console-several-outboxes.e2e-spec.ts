import { INestApplication, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import request from 'supertest';
import { getOutboxToken, OutboxConfigurationError, OutboxDeadLetters, OutboxModule, OutboxService } from '../src';
import { OutboxConsoleModule } from '../src/console/outbox-console.module';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { uniqueQueue } from './helpers/consumers';
import { CONSOLE_TOKEN, FailingSerializer, startTwoOutboxConsoleApp, TokenGuard } from './helpers/console-app';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

const AUTH = { 'x-console-token': CONSOLE_TOKEN };
const SAME_SITE = { ...AUTH, 'x-outbox-console': '1', 'content-type': 'application/json' };
const idsOf = (res: request.Response) =>
  (res.body.items as Array<{ messageId: string }>).map((m) => m.messageId).sort();

describeWith(
  ['postgres', 'rabbitmq'],
  `Outbox console of two outboxes: default on ${DATABASE_LABEL.postgres}, 'billing' on ${DATABASE_LABEL.sqlite}`,
  () => {
    let ordersDb: TestDatabase;
    let billingDb: TestDatabase;
    let app: INestApplication;
    const queues = { orders: uniqueQueue('outbox-console-orders'), billing: uniqueQueue('outbox-console-billing') };
    const serializers = { orders: new FailingSerializer(), billing: new FailingSerializer() };
    const recorders = {} as Record<'orders' | 'billing', AmqpRecorder>;
    const orderIds: string[] = [];
    const invoiceIds: string[] = [];
    const http = () => request(app.getHttpServer());

    beforeAll(async () => {
      [ordersDb, billingDb] = await Promise.all([createTestDatabase('postgres'), createTestDatabase('sqlite')]);
      recorders.orders = await new AmqpRecorder(queues.orders).start();
      recorders.billing = await new AmqpRecorder(queues.billing).start();
      app = await startTwoOutboxConsoleApp({ ordersDb, billingDb, queues, serializers });
      const orders = app.get(OutboxService);
      const billing = app.get<OutboxService>(getOutboxToken(OutboxService, 'billing'));
      await orders.transaction(async () => {
        for (const n of [1, 2]) orderIds.push(await orders.emit('OrderPlaced', { fail: 'orders down', n }));
      });
      await billing.transaction(async () => {
        for (const n of [1, 2, 3]) invoiceIds.push(await billing.emit('InvoiceIssued', { fail: 'ledger down', n }));
      });
      await waitFor(
        async () => (await orders.stats()).dead === 2 && (await billing.stats()).dead === 3,
        'two orders and three invoices to go dead',
      );
    });

    afterAll(async () => {
      await app?.close();
      await recorders.orders?.stop();
      await recorders.billing?.stop();
      await Promise.all([ordersDb?.drop(), billingDb?.drop()]);
    });

    it('lists every outbox of the app with its own backlog, the default one first', async () => {
      const res = await http().get('/outbox-console/api/outboxes').set(AUTH).expect(200);
      expect(res.body.outboxes).toEqual([
        { name: 'default', default: true, allowEdit: false, stats: expect.objectContaining({ dead: 2, pending: 0 }) },
        { name: 'billing', default: false, allowEdit: false, stats: expect.objectContaining({ dead: 3, pending: 0 }) },
      ]);
    });

    it('answers each route for the outbox ?outbox= names; without it, for the default one', async () => {
      const summary = (query = '') => http().get(`/outbox-console/api/summary${query}`).set(AUTH).expect(200);
      expect((await summary()).body).toMatchObject({ dead: 2 });
      expect((await summary('?outbox=default')).body).toMatchObject({ dead: 2 });
      expect((await summary('?outbox=billing')).body).toMatchObject({ dead: 3 });

      expect(idsOf(await http().get('/outbox-console/api/dead-letters').set(AUTH).expect(200))).toEqual(
        [...orderIds].sort(),
      );
      const billingPage = await http()
        .get('/outbox-console/api/dead-letters?outbox=billing&pattern=InvoiceIssued&limit=2')
        .set(AUTH)
        .expect(200);
      expect(billingPage.body.items).toHaveLength(2);
      expect(invoiceIds).toEqual(expect.arrayContaining(idsOf(billingPage)));
      const rest = await http()
        .get('/outbox-console/api/dead-letters')
        .query({ outbox: 'billing', cursor: billingPage.body.nextCursor })
        .set(AUTH)
        .expect(200);
      expect([...idsOf(billingPage), ...idsOf(rest)].sort()).toEqual([...invoiceIds].sort());
      const count = await http()
        .get('/outbox-console/api/dead-letters/count?outbox=billing&errorContains=LEDGER')
        .set(AUTH)
        .expect(200);
      expect(count.body).toEqual({ count: 3 });

      // A message is looked up in the outbox named: an invoice is not in the default outbox.
      const missing = await http().get(`/outbox-console/api/messages/${invoiceIds[0]}`).set(AUTH);
      expect(missing.status).toBe(404);
      expect(missing.body.detail).toContain("The outbox 'default' has no message with id");
      const invoice = await http().get(`/outbox-console/api/messages/${invoiceIds[0]}?outbox=billing`).set(AUTH);
      expect(invoice.status).toBe(200);
      expect(invoice.body).toMatchObject({ messageId: invoiceIds[0], pattern: 'InvoiceIssued', status: 'dead' });

      const page = await http().get('/outbox-console?outbox=billing').set(AUTH).expect(200);
      expect(page.text).toContain('<nav id="outboxes"');
    });

    it('answers an unknown outbox name with 404 problem+json naming the outboxes there are', async () => {
      for (const res of [
        await http().get('/outbox-console/api/summary?outbox=payroll').set(AUTH),
        await http().get('/outbox-console/api/dead-letters?outbox=payroll').set(AUTH),
        await http().get('/outbox-console?outbox=payroll').set(AUTH),
        await http().post('/outbox-console/api/purge?outbox=payroll').set(SAME_SITE).send({ filter: {} }),
      ]) {
        expect(res.status).toBe(404);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(res.body).toEqual({
          type: 'urn:nestjs-outbox:console:unknown-outbox',
          title: 'Unknown outbox',
          status: 404,
          detail: expect.stringContaining('no outbox named "payroll". Its outboxes: default, billing'),
        });
      }
      const twice = await http().get('/outbox-console/api/summary?outbox=billing&outbox=default').set(AUTH);
      expect(twice.status).toBe(400);
      expect(twice.body.detail).toContain('"outbox" must be one DataSource name');
      expect(await app.get(OutboxDeadLetters).count()).toBe(2);
    });

    it('keeps the guard and the cross-site protection for every outbox', async () => {
      expect((await http().get('/outbox-console/api/summary?outbox=billing')).status).toBe(401);
      expect((await http().get('/outbox-console/api/outboxes')).status).toBe(401);
      expect((await http().get('/outbox-console/api/outboxes').set('x-console-token', 'wrong')).status).toBe(403);
      const crossSite = await http()
        .post('/outbox-console/api/purge?outbox=billing')
        .set({ ...SAME_SITE, origin: 'https://evil.example' })
        .send({ filter: {} });
      expect(crossSite.status).toBe(403);
      const billingDeadLetters = app.get<OutboxDeadLetters>(getOutboxToken(OutboxDeadLetters, 'billing'));
      expect(await billingDeadLetters.count()).toBe(3);
    });

    it("requeues and purges in the named outbox only; each outbox's series counts its own publishes", async () => {
      serializers.billing.failing = false;
      const requeued = await http()
        .post('/outbox-console/api/requeue?outbox=billing')
        .set(SAME_SITE)
        .send({ filter: { pattern: 'InvoiceIssued' } });
      expect(requeued.status).toBe(200);
      expect(requeued.body).toEqual({ count: 3 });
      await waitFor(() => recorders.billing.distinct().size === 3, 'the three invoices to reach the billing queue');
      expect([...recorders.billing.distinct()].sort()).toEqual([...invoiceIds].sort());
      expect(recorders.orders.distinct().size).toBe(0);
      expect(await app.get(OutboxDeadLetters).count()).toBe(2);

      // Purging an order id through the billing outbox touches nothing; through the default one, it does.
      const wrongOutbox = await http()
        .post('/outbox-console/api/purge?outbox=billing')
        .set(SAME_SITE)
        .send({ ids: [orderIds[0]] });
      expect(wrongOutbox.body).toEqual({ count: 0 });
      const purged = await http()
        .post('/outbox-console/api/purge')
        .set(SAME_SITE)
        .send({ ids: [orderIds[0]] });
      expect(purged.body).toEqual({ count: 1 });

      const published = async (query: string) => {
        const res = await http().get(`/outbox-console/api/series${query}`).set(AUTH).expect(200);
        return {
          outbox: res.body.outbox as string,
          published: (res.body.samples as Array<{ published: number }>).reduce((sum, s) => sum + s.published, 0),
        };
      };
      await waitFor(async () => (await published('?outbox=billing')).published === 3, "billing's series to count 3");
      expect(await published('?outbox=billing')).toEqual({ outbox: 'billing', published: 3 });
      expect(await published('')).toEqual({ outbox: 'default', published: 0 });
      const list = await http().get('/outbox-console/api/outboxes').set(AUTH).expect(200);
      expect(list.body.outboxes.map((o: { name: string; stats: { dead: number } }) => [o.name, o.stats.dead])).toEqual([
        ['default', 1],
        ['billing', 0],
      ]);
    });
  },
);

describe(`Outbox console of an app whose only outbox is named, on ${DATABASE_LABEL.sqlite}`, () => {
  let db: TestDatabase;
  let app: INestApplication;

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    @Module({
      imports: [
        TypeOrmModule.forRoot({ ...db.options, name: 'billing', autoLoadEntities: true, synchronize: true } as never),
        OutboxModule.forRoot({ dataSource: 'billing', client: undefined, publisher: { enabled: false } }),
        OutboxConsoleModule.forRoot({ guard: TokenGuard }),
      ],
    })
    class NamedOnlyModule {}
    const moduleRef = await Test.createTestingModule({ imports: [NamedOnlyModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('shows that outbox without ?outbox=, and names it when asked for the default one', async () => {
    const billing = app.get<OutboxService>(getOutboxToken(OutboxService, 'billing'));
    await billing.transaction(() => billing.emit('InvoiceIssued', { n: 1 }));
    const list = await request(app.getHttpServer()).get('/outbox-console/api/outboxes').set(AUTH).expect(200);
    expect(list.body.outboxes).toEqual([
      { name: 'billing', default: true, allowEdit: false, stats: expect.objectContaining({ pending: 1 }) },
    ]);
    const summary = await request(app.getHttpServer()).get('/outbox-console/api/summary').set(AUTH).expect(200);
    expect(summary.body).toMatchObject({ pending: 1 });
    const missing = await request(app.getHttpServer()).get('/outbox-console/api/summary?outbox=default').set(AUTH);
    expect(missing.status).toBe(404);
    expect(missing.body.detail).toContain('Its outboxes: billing');
  });
});

describe('Outbox console without any outbox', () => {
  it('fails at startup with OutboxConfigurationError saying to import OutboxModule', async () => {
    @Module({ imports: [OutboxConsoleModule.forRoot({ guard: TokenGuard })] })
    class NoOutboxModule {}
    const moduleRef = await Test.createTestingModule({ imports: [NoOutboxModule] }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await expect(app.init()).rejects.toThrow(OutboxConfigurationError);
    await expect(app.init()).rejects.toThrow(/found no outbox in the app: import OutboxModule\.forRoot\(\)/);
    await app.close();
  });
});
