import { Body, Controller, INestApplication, Injectable, Module, Post } from '@nestjs/common';
import { ClientsModule, Transport } from '@nestjs/microservices';
import { ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { getDataSourceToken } from '@nestjs/typeorm';
import { randomBytes } from 'node:crypto';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import request from 'supertest';
import { Column, DataSource, Entity, PrimaryGeneratedColumn } from 'typeorm';
import {
  getOutboxToken,
  Idempotent,
  InjectOutbox,
  OnOutboxEvent,
  OUTBOX_CHANNELS,
  OutboxDeadLetters,
  OutboxEventContext,
  OutboxHealthIndicator,
  OutboxMessage,
  OutboxModule,
  OutboxPublisher,
  OutboxService,
} from '../src';
import { OutboxPublishedEvent, OutboxRetryEvent } from '../src/events/publisher-events';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { twoDataSources } from './fixtures/two-data-sources';
import { OutboxConfigurationError } from '../src/errors';
import { TestOrder } from './fixtures/order.entity';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { rmqClientOptions, startConsumer, uniqueQueue } from './helpers/consumers';
import { createTestDatabase, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith, SERVICES } from './helpers/services';
import { TcpProxy } from './helpers/tcp-proxy';

/** The billing DataSource's business rows. */
@Entity('test_invoices')
class TestInvoice {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 100 })
  reference!: string;

  @Column({ type: 'int' })
  amount!: number;
}

const suffix = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
/** Core NATS subjects are global to the server: unique per run. */
const INVOICE_ISSUED = `test.invoice-issued.${suffix}`;
const ORDER_PLACED = 'OrderPlaced';

@Injectable()
class Shop {
  constructor(
    readonly orders: OutboxService, // the default DataSource's outbox, injected as always
    @InjectOutbox('billing') readonly billing: OutboxService,
    @InjectOutbox('billing', OutboxDeadLetters) readonly billingDeadLetters: OutboxDeadLetters,
  ) {}

  placeOrder(reference: string, key?: string): Promise<string> {
    return this.orders.transaction(async (manager) => {
      await manager.insert(TestOrder, { reference, amount: 1 });
      return this.orders.emit(ORDER_PLACED, { reference }, { key });
    });
  }

  issueInvoice(reference: string, key?: string): Promise<string> {
    return this.billing.transaction(async (manager) => {
      await manager.insert(TestInvoice, { reference, amount: 1 });
      return this.billing.emit(INVOICE_ISSUED, { reference }, { key });
    });
  }
}

@Controller()
class InvoicesController {
  constructor(
    @InjectOutbox('billing') private readonly billing: OutboxService,
    private readonly orders: OutboxService,
  ) {}

  /** Records its key in the billing database, in the transaction of the invoice and its event. */
  @Post('invoices')
  @Idempotent({ dataSource: 'billing' })
  async create(@Body() body: { reference: string; fail?: boolean }) {
    const { identifiers } = await this.billing.manager.insert(TestInvoice, { reference: body.reference, amount: 1 });
    const messageId = await this.billing.emit(INVOICE_ISSUED, { reference: body.reference });
    if (body.fail) throw new Error('failed after writing the invoice');
    return { id: identifiers[0].id, messageId };
  }

  /** Records its key with the default outbox. */
  @Post('orders')
  @Idempotent()
  async order(@Body() body: { reference: string }) {
    return { messageId: await this.orders.emit(ORDER_PLACED, { reference: body.reference }) };
  }
}

describeWith(
  ['mariadb', 'postgres', 'rabbitmq', 'nats'],
  'Two outboxes in one app: orders on MariaDB through RabbitMQ, billing on PostgreSQL through NATS',
  () => {
    let ordersDb: TestDatabase;
    let billingDb: TestDatabase;
    let rmqProxy: TcpProxy;
    let natsProxy: TcpProxy;
    let recorder: AmqpRecorder;
    let natsConsumer: Awaited<ReturnType<typeof startConsumer>>;
    let app: INestApplication;
    const queue = uniqueQueue('outbox-several');
    const published = { orders: [] as string[], billing: [] as string[] };
    /** What the shared diagnostics channels carried, by the `dataSource` the events name. */
    const onChannel = { published: new Map<string, string[]>(), retried: new Map<string, string[]>() };
    const listenPublished = (e: unknown) => {
      const { dataSource, messages } = e as OutboxPublishedEvent;
      onChannel.published.set(dataSource, [
        ...(onChannel.published.get(dataSource) ?? []),
        ...messages.map((m) => m.messageId),
      ]);
    };
    const listenRetry = (e: unknown) => {
      const { dataSource, messageId } = e as OutboxRetryEvent;
      onChannel.retried.set(dataSource, [...(onChannel.retried.get(dataSource) ?? []), messageId]);
    };

    beforeAll(async () => {
      [ordersDb, billingDb] = await Promise.all([createTestDatabase('mariadb'), createTestDatabase('postgres')]);
      rmqProxy = await new TcpProxy(SERVICES.rabbitmq.host, SERVICES.rabbitmq.port).start();
      natsProxy = await new TcpProxy(SERVICES.nats.host, SERVICES.nats.port).start();
      recorder = await new AmqpRecorder(queue).start();
      natsConsumer = await startConsumer([INVOICE_ISSUED], {
        transport: Transport.NATS,
        options: { servers: [`nats://${SERVICES.nats.host}:${SERVICES.nats.port}`] },
      });
      // The default publishTimeout (10 s): a shorter one on a busy machine times out confirmed publishes and sends
      // them again (at-least-once), which the "once" assertions below would count.
      const relay = { pollingInterval: 50 };
      const retry = { initialDelay: 20, maxDelay: 200 };
      @Module({
        imports: [
          ...twoDataSources(ordersDb, billingDb, {
            orders: { entities: [TestOrder] },
            billing: { entities: [TestInvoice] },
          }),
          ClientsModule.register([
            {
              name: 'ORDERS_BROKER',
              ...rmqClientOptions(queue, `amqp://guest:guest@127.0.0.1:${rmqProxy.port}`, {
                socketOptions: { reconnectTimeInSeconds: 0.2, heartbeatIntervalInSeconds: 1 },
              }),
            },
            {
              name: 'BILLING_BROKER',
              transport: Transport.NATS,
              options: {
                servers: [`nats://127.0.0.1:${natsProxy.port}`],
                reconnectTimeWait: 200,
                maxReconnectAttempts: -1,
              },
            },
          ] as any),
          ScheduleModule.forRoot(),
          OutboxModule.forRoot({ client: 'ORDERS_BROKER', publisher: relay, retry }),
          OutboxModule.forRootAsync({
            dataSource: 'billing',
            useFactory: () => ({ client: 'BILLING_BROKER', publisher: relay, retry }),
          }),
        ],
        controllers: [InvoicesController],
        providers: [Shop],
      })
      class ShopModule {}
      const moduleRef = await Test.createTestingModule({ imports: [ShopModule] }).compile();
      app = moduleRef.createNestApplication();
      app.useLogger(false);
      await app.init();
      const record = (dataSource: string, into: string[]) => (e: OutboxPublishedEvent) => {
        if (e.dataSource !== dataSource)
          throw new Error(`a '${e.dataSource}' event reached the ${dataSource} publisher`);
        into.push(...e.messages.map((m) => m.messageId));
      };
      app.get(OutboxPublisher).on('published', record('default', published.orders));
      app
        .get<OutboxPublisher>(getOutboxToken(OutboxPublisher, 'billing'))
        .on('published', record('billing', published.billing));
      subscribe(OUTBOX_CHANNELS.published, listenPublished);
      subscribe(OUTBOX_CHANNELS.retry, listenRetry);
    });

    afterAll(async () => {
      unsubscribe(OUTBOX_CHANNELS.published, listenPublished);
      unsubscribe(OUTBOX_CHANNELS.retry, listenRetry);
      await app?.close();
      await natsConsumer?.close();
      await recorder?.stop();
      await rmqProxy?.stop();
      await natsProxy?.stop();
      await Promise.all([ordersDb?.drop(), billingDb?.drop()]);
    });

    const ordersSource = () => app.get<DataSource>(getDataSourceToken());
    const billingSource = () => app.get<DataSource>(getDataSourceToken('billing'));
    const natsIds = () => natsConsumer.received.map((m) => m.messageId!);
    const rowsOf = (source: DataSource) => source.getRepository(OutboxMessage).find({ order: { seq: 'ASC' } });

    it('injects one OutboxService per DataSource, each writing to its own database', () => {
      const shop = app.get(Shop);
      expect(shop.orders).toBe(app.get(OutboxService));
      expect(shop.billing).toBe(app.get(getOutboxToken(OutboxService, 'billing')));
      expect(shop.billing).not.toBe(shop.orders);
      expect(getOutboxToken(OutboxService)).toBe(OutboxService);
      expect(getOutboxToken(OutboxService, 'default')).toBe(OutboxService);
      expect(app.get(getOutboxToken(OutboxDeadLetters, 'billing'))).not.toBe(app.get(OutboxDeadLetters));
      expect(shop.billingDeadLetters).toBe(app.get(getOutboxToken(OutboxDeadLetters, 'billing')));
      expect(app.get(getOutboxToken(OutboxHealthIndicator, 'billing'))).not.toBe(app.get(OutboxHealthIndicator));
    });

    it('never shares a scheduler name, a NOTIFY channel or an advisory lock class between the two', () => {
      const orders = app.get(OutboxPublisher).resourceNames;
      const billing = app.get<OutboxPublisher>(getOutboxToken(OutboxPublisher, 'billing')).resourceNames;
      expect(orders.publisherJob).toBe('nestjs-outbox:publisher');
      expect(orders.cleanupJob).toBe('nestjs-outbox:cleanup');
      expect(billing.publisherJob).toBe('nestjs-outbox:publisher:billing');
      expect(billing.cleanupJob).toBe('nestjs-outbox:cleanup:billing');
      for (const name of ['publisherJob', 'cleanupJob', 'notifyChannel', 'advisoryLockClass'] as const) {
        expect(billing[name]).not.toEqual(orders[name]);
      }
      const intervals = app.get(SchedulerRegistry).getIntervals();
      expect(intervals).toEqual(
        expect.arrayContaining([orders.publisherJob, orders.cleanupJob, billing.publisherJob, billing.cleanupJob]),
      );
    });

    it('relays each commit to its own broker, once, each publisher claiming only its own rows', async () => {
      const shop = app.get(Shop);
      const orderIds: string[] = [];
      const invoiceIds: string[] = [];
      // Commits on both, interleaved and concurrent, keyed and unkeyed.
      await Promise.all(
        Array.from({ length: 20 }, async (_, n) => {
          orderIds.push(await shop.placeOrder(`o-${n}`, n % 2 ? `customer-${n % 3}` : undefined));
          invoiceIds.push(await shop.issueInvoice(`i-${n}`, n % 2 ? `account-${n % 3}` : undefined));
        }),
      );
      await waitFor(() => orderIds.every((id) => recorder.distinct().has(id)), 'every order on RabbitMQ');
      await waitFor(() => invoiceIds.every((id) => natsIds().includes(id)), 'every invoice on NATS');
      // The right consumer, once.
      expect(recorder.messages.map((m) => m.messageId).sort()).toEqual([...orderIds].sort());
      expect(natsIds().sort()).toEqual([...invoiceIds].sort());
      expect(natsConsumer.received.every((m) => m.pattern === INVOICE_ISSUED)).toBe(true);
      // Each publisher published (claimed and marked) only its own outbox's rows. Its `published` event comes once
      // the batch is marked, which may be after the consumer has the message.
      await waitFor(
        () => published.orders.length >= orderIds.length && published.billing.length >= invoiceIds.length,
        'both publishers to report their batches',
      );
      expect([...published.orders].sort()).toEqual([...orderIds].sort());
      expect([...published.billing].sort()).toEqual([...invoiceIds].sort());
      // The diagnostics channel is one for the process: each event names the outbox it comes from.
      expect([...onChannel.published.keys()].sort()).toEqual(['billing', 'default']);
      expect(new Set(onChannel.published.get('default'))).toEqual(new Set(orderIds));
      expect(new Set(onChannel.published.get('billing'))).toEqual(new Set(invoiceIds));
      // Each database holds only its own outbox's rows.
      expect((await rowsOf(ordersSource())).map((r) => r.messageId).sort()).toEqual([...orderIds].sort());
      expect((await rowsOf(billingSource())).map((r) => r.messageId).sort()).toEqual([...invoiceIds].sort());
      await waitFor(async () => (await app.get(Shop).billing.stats()).pending === 0, 'billing rows marked');
      await waitFor(async () => (await app.get(Shop).orders.stats()).pending === 0, 'order rows marked');
    });

    it('takes the named outbox advisory locks for keyed writes on PostgreSQL, under its own lock class', async () => {
      const billing = app.get(Shop).billing;
      const lockClass = app.get<OutboxPublisher>(getOutboxToken(OutboxPublisher, 'billing')).resourceNames
        .advisoryLockClass;
      let held: number[] = [];
      await billing.transaction(async () => {
        await billing.emit(INVOICE_ISSUED, { reference: 'locked' }, { key: 'account-lock' });
        const rows: { classid: string }[] = await billingSource().query(
          `SELECT classid::bigint AS classid FROM pg_locks
           WHERE locktype = 'advisory' AND objsubid = 2 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        );
        held = rows.map((r) => Number(r.classid));
      });
      expect(held).toContain(lockClass >>> 0);
      expect(held).not.toContain(0x6f757462);
    });

    it('cutting RabbitMQ delays only the orders outbox; billing keeps flowing over NATS', async () => {
      const shop = app.get(Shop);
      rmqProxy.cut();
      try {
        const orders = [await shop.placeOrder('cut-1'), await shop.placeOrder('cut-2')];
        const invoices = [await shop.issueInvoice('during-1'), await shop.issueInvoice('during-2')];
        await waitFor(() => invoices.every((id) => natsIds().includes(id)), 'invoices on NATS during the cut');
        // The orders are still waiting: attempted, not delivered.
        expect(orders.some((id) => recorder.distinct().has(id))).toBe(false);
        expect((await shop.orders.stats()).pending).toBeGreaterThanOrEqual(orders.length);
        await waitFor(
          () => orders.some((id) => onChannel.retried.get('default')?.includes(id)),
          'a retry of an order, on the channel, named for the default outbox',
        );
        expect(onChannel.retried.get('billing') ?? []).toEqual([]);
        rmqProxy.restore();
        await waitFor(() => orders.every((id) => recorder.distinct().has(id)), 'orders after the restore', 30_000);
      } finally {
        rmqProxy.restore();
      }
    });

    it('cutting NATS delays only the billing outbox; orders keep flowing over RabbitMQ', async () => {
      const shop = app.get(Shop);
      natsProxy.cut();
      try {
        const invoices = [await shop.issueInvoice('cut-3'), await shop.issueInvoice('cut-4')];
        const orders = [await shop.placeOrder('during-3'), await shop.placeOrder('during-4')];
        await waitFor(() => orders.every((id) => recorder.distinct().has(id)), 'orders on RabbitMQ during the cut');
        expect(invoices.some((id) => natsIds().includes(id))).toBe(false);
        await waitFor(
          () => invoices.some((id) => onChannel.retried.get('billing')?.includes(id)),
          'a retry of an invoice, on the channel, named for the billing outbox',
        );
        expect(invoices.some((id) => onChannel.retried.get('default')?.includes(id))).toBe(false);
        natsProxy.restore();
        await waitFor(() => invoices.every((id) => natsIds().includes(id)), 'invoices after the restore', 30_000);
      } finally {
        natsProxy.restore();
      }
    });

    it('@Idempotent({ dataSource: "billing" }) records the key in the billing database, with the invoice', async () => {
      const server = app.getHttpServer();
      const key = `invoice-${suffix}`;
      const invoices = () => billingSource().getRepository(TestInvoice).countBy({ reference: key });
      const records = (source: DataSource) => source.getRepository(IdempotencyRecord).countBy({ key });

      // A handler that fails after its writes: the invoice, its event and the key roll back together.
      await request(server)
        .post('/invoices')
        .set('Idempotency-Key', key)
        .send({ reference: key, fail: true })
        .expect(500);
      expect(await invoices()).toBe(0);
      expect(await records(billingSource())).toBe(0);

      const first = await request(server).post('/invoices').set('Idempotency-Key', key).send({ reference: key });
      expect(first.status).toBe(201);
      expect(await invoices()).toBe(1);
      expect(await records(billingSource())).toBe(1);
      expect(await records(ordersSource())).toBe(0);
      const row = await billingSource().getRepository(OutboxMessage).findOneByOrFail({
        messageId: first.body.messageId,
      });
      expect(row.pattern).toBe(INVOICE_ISSUED);

      const replay = await request(server).post('/invoices').set('Idempotency-Key', key).send({ reference: key });
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toEqual(first.body);
      expect(await invoices()).toBe(1);
    });

    it('@Idempotent() without a dataSource still records the key with the default outbox', async () => {
      const key = `order-${suffix}`;
      const response = await request(app.getHttpServer())
        .post('/orders')
        .set('Idempotency-Key', key)
        .send({ reference: key });
      expect(response.status).toBe(201);
      expect(await ordersSource().getRepository(IdempotencyRecord).countBy({ key })).toBe(1);
      expect(await billingSource().getRepository(IdempotencyRecord).countBy({ key })).toBe(0);
    });

    it('nests a transaction of one outbox in the other: each emit joins its own DataSource’s transaction', async () => {
      const { orders, billing } = app.get(Shop);
      const reference = `nested-${suffix}`;
      await expect(
        orders.transaction(async () => {
          await orders.emit(ORDER_PLACED, { reference });
          await billing.transaction(async () => {
            await billing.emit(INVOICE_ISSUED, { reference });
            // Back in the orders transaction, from inside the billing one.
            expect(orders.inTransaction).toBe(true);
            await orders.emit(ORDER_PLACED, { reference, inner: true });
          });
          throw new Error('roll the orders transaction back');
        }),
      ).rejects.toThrow('roll the orders transaction back');
      const ordersRows = (await rowsOf(ordersSource())).filter((r) => r.payload.includes(reference));
      const billingRows = (await rowsOf(billingSource())).filter((r) => r.payload.includes(reference));
      expect(ordersRows).toEqual([]); // both order events were in the outer transaction, rolled back
      expect(billingRows).toHaveLength(1); // the inner billing transaction had committed
    });
  },
);

describe('@Idempotent({ dataSource })', () => {
  it('refuses a method that names another DataSource than its controller', () => {
    expect(() => {
      @Idempotent({ dataSource: 'billing' })
      class _Mixed {
        @Idempotent({ dataSource: 'reporting' })
        handle() {
          return undefined;
        }
      }
    }).toThrow(OutboxConfigurationError);
  });
});

describeWith(['postgres', 'rabbitmq'], 'Two outboxes in one PostgreSQL database, one schema per DataSource', () => {
  let db: TestDatabase;
  let app: INestApplication;
  const queues = { orders: uniqueQueue('outbox-schema-orders'), billing: uniqueQueue('outbox-schema-billing') };
  const recorders: Record<'orders' | 'billing', AmqpRecorder> = {} as any;
  const published = { orders: [] as string[], billing: [] as string[] };

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    const admin = new DataSource(db.options);
    await admin.initialize();
    await admin.query('CREATE SCHEMA billing');
    await admin.destroy();
    recorders.orders = await new AmqpRecorder(queues.orders).start();
    recorders.billing = await new AmqpRecorder(queues.billing).start();
    const relay = { pollingInterval: 50 };
    @Module({
      imports: [
        ...twoDataSources(db, db, {
          orders: { entities: [TestOrder] },
          billing: { schema: 'billing', entities: [TestInvoice] },
        }),
        ClientsModule.register([
          { name: 'ORDERS_BROKER', ...rmqClientOptions(queues.orders) },
          { name: 'BILLING_BROKER', ...rmqClientOptions(queues.billing) },
        ] as any),
        ScheduleModule.forRoot(),
        OutboxModule.forRoot({ client: 'ORDERS_BROKER', publisher: relay }),
        OutboxModule.forRoot({ dataSource: 'billing', client: 'BILLING_BROKER', publisher: relay }),
      ],
      providers: [Shop],
    })
    class SchemasModule {}
    const moduleRef = await Test.createTestingModule({ imports: [SchemasModule] }).compile();
    app = moduleRef.createNestApplication();
    app.useLogger(false);
    await app.init();
    const record = (into: string[]) => (e: OutboxPublishedEvent) => into.push(...e.messages.map((m) => m.messageId));
    app.get(OutboxPublisher).on('published', record(published.orders));
    app.get<OutboxPublisher>(getOutboxToken(OutboxPublisher, 'billing')).on('published', record(published.billing));
  });

  afterAll(async () => {
    await app?.close();
    await recorders.orders?.stop();
    await recorders.billing?.stop();
    await db?.drop();
  });

  it('keeps each outbox in its schema: each publisher claims only its own rows, each queue gets only its own', async () => {
    const shop = app.get(Shop);
    const orderIds: string[] = [];
    const invoiceIds: string[] = [];
    await Promise.all(
      Array.from({ length: 20 }, async (_, n) => {
        orderIds.push(await shop.placeOrder(`o-${n}`, n % 2 ? `same-${n % 3}` : undefined));
        invoiceIds.push(await shop.issueInvoice(`i-${n}`, n % 2 ? `same-${n % 3}` : undefined));
      }),
    );
    await waitFor(
      () => published.orders.length >= orderIds.length && published.billing.length >= invoiceIds.length,
      'both publishers to publish their rows',
    );
    await waitFor(
      () =>
        orderIds.every((id) => recorders.orders.distinct().has(id)) &&
        invoiceIds.every((id) => recorders.billing.distinct().has(id)),
      'every message in its queue',
    );
    expect([...published.orders].sort()).toEqual([...orderIds].sort());
    expect([...published.billing].sort()).toEqual([...invoiceIds].sort());
    expect(recorders.orders.messages.map((m) => m.messageId).sort()).toEqual([...orderIds].sort());
    expect(recorders.billing.messages.map((m) => m.messageId).sort()).toEqual([...invoiceIds].sort());
    const tables = await app
      .get<DataSource>(getDataSourceToken())
      .query(
        `SELECT table_schema || '.' || table_name AS t FROM information_schema.tables WHERE table_name = 'outbox_messages' ORDER BY 1`,
      );
    expect(tables.map((r: { t: string }) => r.t)).toEqual(['billing.outbox_messages', 'public.outbox_messages']);
  });

  it('lets a keyed write in one outbox go on while the same key is held in the other (distinct lock classes)', async () => {
    const { orders, billing } = app.get(Shop);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let billingHolds!: () => void;
    const holding = new Promise<void>((resolve) => (billingHolds = resolve));
    const billingTx = billing.transaction(async () => {
      await billing.emit(INVOICE_ISSUED, { held: true }, { key: 'shared-key' });
      billingHolds();
      await held;
    });
    await holding;
    try {
      // Same key, same database: with a shared lock class this commit would wait for the billing transaction.
      // lock_timeout turns such a wait into a failure of this test instead of a hang.
      const id = await orders.transaction(async (manager) => {
        await manager.query(`SET LOCAL lock_timeout = '5s'`);
        return orders.emit(ORDER_PLACED, { during: true }, { key: 'shared-key' });
      });
      expect(id).toEqual(expect.any(String));
    } finally {
      release();
      await billingTx;
    }
    // And a second billing writer of that key does wait for the first (same outbox, same lock).
    let secondDone = false;
    let releaseFirst!: () => void;
    const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
    let firstHolds!: () => void;
    const firstHolding = new Promise<void>((resolve) => (firstHolds = resolve));
    const first = billing.transaction(async () => {
      await billing.emit(INVOICE_ISSUED, { first: true }, { key: 'shared-key' });
      firstHolds();
      await firstHeld;
    });
    await firstHolding;
    const second = billing
      .transaction(() => billing.emit(INVOICE_ISSUED, { second: true }, { key: 'shared-key' }))
      .then(() => (secondDone = true));
    await waitFor(async () => {
      const [{ n }] = await app
        .get<DataSource>(getDataSourceToken())
        .query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`,
        );
      return n > 0;
    }, 'the second billing writer to wait for the key');
    expect(secondDone).toBe(false);
    releaseFirst();
    await first;
    await second;
    expect(secondDone).toBe(true);
  });
});

/** In-process handlers bound to one outbox or the other: each outbox runs only its own. */
@Injectable()
class Ledger {
  readonly orders: string[] = [];
  readonly invoices: string[] = [];
  readonly invoicesOnDefault: string[] = [];

  @OnOutboxEvent(ORDER_PLACED)
  order(_payload: unknown, context: OutboxEventContext): void {
    this.orders.push(context.messageId);
  }

  @OnOutboxEvent(INVOICE_ISSUED, { dataSource: 'billing' })
  invoice(_payload: unknown, context: OutboxEventContext): void {
    this.invoices.push(context.messageId);
  }

  /** Bound to the default outbox, which never holds an invoice: must never run. */
  @OnOutboxEvent(INVOICE_ISSUED)
  invoiceOnDefault(_payload: unknown, context: OutboxEventContext): void {
    this.invoicesOnDefault.push(context.messageId);
  }
}

describeWith(['rabbitmq'], 'Two outboxes on SQLite, one file per DataSource', () => {
  let ordersDb: TestDatabase;
  let billingDb: TestDatabase;
  let app: INestApplication;
  const queues = { orders: uniqueQueue('outbox-sqlite-orders'), billing: uniqueQueue('outbox-sqlite-billing') };
  const recorders: Record<'orders' | 'billing', AmqpRecorder> = {} as any;

  beforeAll(async () => {
    [ordersDb, billingDb] = await Promise.all([createTestDatabase('sqlite'), createTestDatabase('sqlite')]);
    recorders.orders = await new AmqpRecorder(queues.orders).start();
    recorders.billing = await new AmqpRecorder(queues.billing).start();
    const relay = { pollingInterval: 50 };
    @Module({
      imports: [
        ...twoDataSources(ordersDb, billingDb, {
          orders: { entities: [TestOrder] },
          billing: { entities: [TestInvoice] },
        }),
        ClientsModule.register([
          { name: 'ORDERS_BROKER', ...rmqClientOptions(queues.orders) },
          { name: 'BILLING_BROKER', ...rmqClientOptions(queues.billing) },
        ] as any),
        ScheduleModule.forRoot(),
        OutboxModule.forRoot({ client: 'ORDERS_BROKER', publisher: relay }),
        OutboxModule.forRoot({ dataSource: 'billing', client: 'BILLING_BROKER', publisher: relay }),
      ],
      controllers: [InvoicesController],
      providers: [Shop, Ledger],
    })
    class SqliteShopModule {}
    const moduleRef = await Test.createTestingModule({ imports: [SqliteShopModule] }).compile();
    app = moduleRef.createNestApplication();
    app.useLogger(false);
    await app.init();
  });

  afterAll(async () => {
    await app?.close();
    await recorders.orders?.stop();
    await recorders.billing?.stop();
    await Promise.all([ordersDb?.drop(), billingDb?.drop()]);
  });

  it('relays each outbox to its own queue, once', async () => {
    const shop = app.get(Shop);
    const orderIds: string[] = [];
    const invoiceIds: string[] = [];
    await Promise.all(
      Array.from({ length: 10 }, async (_, n) => {
        orderIds.push(await shop.placeOrder(`o-${n}`, n % 2 ? 'k' : undefined));
        invoiceIds.push(await shop.issueInvoice(`i-${n}`, n % 2 ? 'k' : undefined));
      }),
    );
    await waitFor(
      () =>
        orderIds.every((id) => recorders.orders.distinct().has(id)) &&
        invoiceIds.every((id) => recorders.billing.distinct().has(id)),
      'every message in its queue',
    );
    expect(recorders.orders.messages.map((m) => m.messageId).sort()).toEqual([...orderIds].sort());
    expect(recorders.billing.messages.map((m) => m.messageId).sort()).toEqual([...invoiceIds].sort());
  });

  it('runs each in-process handler only for the messages of the outbox it is bound to, once each', async () => {
    const shop = app.get(Shop);
    const ledger = app.get(Ledger);
    const orderIds = [await shop.placeOrder(`h-order-${suffix}`), await shop.placeOrder(`h-order2-${suffix}`, 'hk')];
    const invoiceIds = [await shop.issueInvoice(`h-inv-${suffix}`), await shop.issueInvoice(`h-inv2-${suffix}`, 'hk')];
    await waitFor(
      () =>
        orderIds.every((id) => ledger.orders.includes(id)) && invoiceIds.every((id) => ledger.invoices.includes(id)),
      'each handler ran for its outbox',
    );
    for (const id of orderIds) expect(ledger.orders.filter((x) => x === id)).toHaveLength(1);
    for (const id of invoiceIds) expect(ledger.invoices.filter((x) => x === id)).toHaveLength(1);
    expect(ledger.invoices.filter((id) => orderIds.includes(id))).toEqual([]);
    expect(ledger.orders.filter((id) => invoiceIds.includes(id))).toEqual([]);
    expect(ledger.invoicesOnDefault).toEqual([]);
  });

  it('@Idempotent({ dataSource: "billing" }) records the key in the billing file, not in the default one', async () => {
    const key = `sqlite-invoice-${suffix}`;
    const billingSource = app.get<DataSource>(getDataSourceToken('billing'));
    await request(app.getHttpServer())
      .post('/invoices')
      .set('Idempotency-Key', key)
      .send({ reference: key, fail: true })
      .expect(500);
    expect(await billingSource.getRepository(TestInvoice).countBy({ reference: key })).toBe(0);
    expect(await billingSource.getRepository(IdempotencyRecord).countBy({ key })).toBe(0);
    await request(app.getHttpServer())
      .post('/invoices')
      .set('Idempotency-Key', key)
      .send({ reference: key })
      .expect(201);
    expect(await billingSource.getRepository(TestInvoice).countBy({ reference: key })).toBe(1);
    expect(await billingSource.getRepository(IdempotencyRecord).countBy({ key })).toBe(1);
    expect(await app.get<DataSource>(getDataSourceToken()).getRepository(IdempotencyRecord).countBy({ key })).toBe(0);
  });
});
