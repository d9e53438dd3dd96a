import { Body, Controller, INestApplication, Injectable, Module, Post } from '@nestjs/common';
import { ClientsModule } from '@nestjs/microservices';
import { ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import request from 'supertest';
import type { DataSource } from 'typeorm';
import {
  getOutboxToken,
  Idempotent,
  InjectOutbox,
  OutboxDeadLetters,
  outboxEntities,
  outboxMigrations,
  OutboxModule,
  OutboxService,
} from '../src';
import { TestOrder } from './fixtures/order.entity';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { rmqClientOptions, uniqueQueue } from './helpers/consumers';
import { DATABASE_LABEL } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

const ORDER_PLACED = 'OrderPlaced';
const INVOICE_ISSUED = 'InvoiceIssued';
const BILLING = { prefix: 'billing_' };

@Injectable()
class Shop {
  constructor(
    readonly orders: OutboxService,
    @InjectOutbox('billing') readonly billing: OutboxService,
  ) {}

  placeOrder(reference: string, key?: string): Promise<string> {
    return this.orders.transaction(async (manager) => {
      await manager.insert(TestOrder, { reference, amount: 1 });
      return this.orders.emit(ORDER_PLACED, { reference }, { key });
    });
  }

  issueInvoice(reference: string, key?: string): Promise<string> {
    return this.billing.transaction(() => this.billing.emit(INVOICE_ISSUED, { reference }, { key }));
  }
}

@Controller()
class ShopController {
  constructor(
    readonly orders: OutboxService,
    @InjectOutbox('billing') readonly billing: OutboxService,
  ) {}

  @Post('invoices')
  @Idempotent({ dataSource: 'billing' })
  async invoice(@Body() body: { reference: string }) {
    return { messageId: await this.billing.emit(INVOICE_ISSUED, body) };
  }

  @Post('orders')
  @Idempotent()
  async order(@Body() body: { reference: string }) {
    return { messageId: await this.orders.emit(ORDER_PLACED, body) };
  }
}

for (const kind of ['postgres', 'mariadb'] as const) {
  describeWith(
    [kind, 'rabbitmq'],
    `Two outboxes in one ${DATABASE_LABEL[kind]} database, apart by table prefix (tables: { prefix })`,
    () => {
      const fx = useTestDatabase(kind);
      const queues = { orders: uniqueQueue('outbox-tables-orders'), billing: uniqueQueue('outbox-tables-billing') };
      const recorders = { orders: new AmqpRecorder(queues.orders), billing: new AmqpRecorder(queues.billing) };
      let app: INestApplication;

      beforeAll(async () => {
        await Promise.all([recorders.orders.start(), recorders.billing.start()]);
        fx.defer(() => Promise.all([recorders.orders.stop(), recorders.billing.stop()]));
        const relay = { pollingInterval: 50 };
        @Module({
          imports: [
            // The default outbox: the shipped table names, made by synchronize.
            TypeOrmModule.forRoot({
              ...fx.db.options,
              entities: [TestOrder],
              autoLoadEntities: true,
              synchronize: true,
            } as never),
            // The billing outbox, on a second DataSource of the SAME database: its own entities and migrations.
            TypeOrmModule.forRoot({
              ...fx.db.options,
              name: 'billing',
              entities: [...outboxEntities(BILLING)],
              migrations: [...outboxMigrations(BILLING)],
              migrationsRun: true,
            } as never),
            ClientsModule.register([
              { name: 'ORDERS_BROKER', ...rmqClientOptions(queues.orders) },
              { name: 'BILLING_BROKER', ...rmqClientOptions(queues.billing) },
            ] as never),
            ScheduleModule.forRoot(),
            OutboxModule.forRoot({ client: 'ORDERS_BROKER', publisher: relay }),
            OutboxModule.forRootAsync({
              dataSource: 'billing',
              tables: BILLING,
              useFactory: () => ({ client: 'BILLING_BROKER', publisher: relay }),
            }),
          ],
          controllers: [ShopController],
          providers: [Shop],
        })
        class ShopModule {}
        const moduleRef = await Test.createTestingModule({ imports: [ShopModule] }).compile();
        app = moduleRef.createNestApplication();
        app.useLogger(false);
        await app.init(); // the schema check of each outbox passes: its tables are there
        fx.defer(() => app.close());
      });

      const source = () => app.get<DataSource>(getDataSourceToken());
      const q = (name: string) => source().driver.escape(name);
      const column = async (table: string, name: string): Promise<string[]> =>
        (await source().query(`SELECT ${q(name)} AS v FROM ${q(table)}`)).map((r: { v: string }) => r.v).sort();

      it('keeps each outbox in its own tables: the shipped names for the default one, billing_… for billing', async () => {
        const tables: string[] = (
          await source().query(
            kind === 'postgres'
              ? `SELECT table_name AS t FROM information_schema.tables WHERE table_schema = current_schema()`
              : `SELECT TABLE_NAME AS t FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()`,
          )
        ).map((r: { t: string }) => r.t);
        const shipped = [
          'outbox_messages',
          'outbox_attempts',
          'outbox_key_locks',
          'idempotency_keys',
          'idempotency_steps',
        ];
        expect(tables).toEqual(expect.arrayContaining([...shipped, ...shipped.map((t) => `billing_${t}`)]));
      });

      it('relays concurrent commits of both, each from its own table to its own consumer, once', async () => {
        const shop = app.get(Shop);
        const orderIds: string[] = [];
        const invoiceIds: string[] = [];
        await Promise.all(
          Array.from({ length: 20 }, async (_, n) => {
            const [order, invoice] = await Promise.all([
              shop.placeOrder(`o-${n}`, n % 2 ? `customer-${n % 3}` : undefined),
              shop.issueInvoice(`i-${n}`, n % 2 ? `account-${n % 3}` : undefined),
            ]);
            orderIds.push(order);
            invoiceIds.push(invoice);
          }),
        );
        await waitFor(() => orderIds.every((id) => recorders.orders.distinct().has(id)), 'every order relayed');
        await waitFor(() => invoiceIds.every((id) => recorders.billing.distinct().has(id)), 'every invoice relayed');
        expect(recorders.orders.messages.map((m) => m.messageId).sort()).toEqual([...orderIds].sort());
        expect(recorders.billing.messages.map((m) => m.messageId).sort()).toEqual([...invoiceIds].sort());
        expect(await column('outbox_messages', 'message_id')).toEqual([...orderIds].sort());
        expect(await column('billing_outbox_messages', 'message_id')).toEqual([...invoiceIds].sort());
        await waitFor(async () => (await shop.billing.stats()).pending === 0, 'billing rows marked');
        await waitFor(async () => (await shop.orders.stats()).pending === 0, 'order rows marked');
      });

      it('records each @Idempotent() key in the idempotency table of its outbox only', async () => {
        const server = app.getHttpServer();
        const invoice = await request(server)
          .post('/invoices')
          .set('Idempotency-Key', 'inv-1')
          .send({ reference: 'r' });
        expect(invoice.status).toBe(201);
        const order = await request(server).post('/orders').set('Idempotency-Key', 'ord-1').send({ reference: 'r' });
        expect(order.status).toBe(201);
        const replay = await request(server).post('/invoices').set('Idempotency-Key', 'inv-1').send({ reference: 'r' });
        expect(replay.headers['idempotent-replayed']).toBe('true');
        expect(replay.body).toEqual(invoice.body);
        expect(await column('billing_idempotency_keys', 'idempotency_key')).toEqual(['inv-1']);
        expect(await column('idempotency_keys', 'idempotency_key')).toEqual(['ord-1']);
        expect(await column('billing_outbox_messages', 'message_id')).toContain(invoice.body.messageId);
        expect(await column('outbox_messages', 'message_id')).not.toContain(invoice.body.messageId);
      });

      it('lists the dead letters of each outbox from its own table', async () => {
        const ids = await Promise.all([app.get(Shop).issueInvoice('dead-1'), app.get(Shop).issueInvoice('dead-2')]);
        await waitFor(() => ids.every((id) => recorders.billing.distinct().has(id)), 'the invoices relayed');
        // Marked sent (the mark comes after the broker's confirm), so that nothing writes these rows any more.
        await waitFor(async () => (await app.get(Shop).billing.stats()).pending === 0, 'the invoices marked');
        await source().query(
          `UPDATE ${q('billing_outbox_messages')} SET ${q('status')} = 'dead', ${q('dead_at')} = 1 ` +
            `WHERE ${q('message_id')} IN ('${ids[0]}', '${ids[1]}')`,
        );
        const billing = app.get<OutboxDeadLetters>(getOutboxToken(OutboxDeadLetters, 'billing'));
        expect(await billing.count()).toBe(2);
        expect((await billing.page()).items.map((i) => i.messageId).sort()).toEqual([...ids].sort());
        expect((await billing.get(ids[0]))?.status).toBe('dead');
        expect(await app.get(OutboxDeadLetters).count()).toBe(0);
        expect(await app.get(OutboxDeadLetters).get(ids[0])).toBeNull();
      });
    },
  );
}
