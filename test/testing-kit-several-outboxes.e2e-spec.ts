import {
  CanActivate,
  Controller,
  ExecutionContext,
  INestApplication,
  Injectable,
  LoggerService,
  Module,
  UseGuards,
} from '@nestjs/common';
import { ClientsModule, EventPattern, MicroserviceOptions, Payload, Transport } from '@nestjs/microservices';
import { ScheduleModule } from '@nestjs/schedule';
import { Test, TestingModuleBuilder } from '@nestjs/testing';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import {
  getOutboxMessageId,
  getOutboxToken,
  Idempotent,
  InjectOutbox,
  OutboxConfigurationError,
  OutboxEnvelopeDeserializer,
  OutboxModule,
  OutboxService,
} from '../src';
import { twoDataSources } from './fixtures/two-data-sources';
import { deliverEveryMessageTwice, flushEveryOutbox, flushOutbox } from '../src/testing';
import { TestOrder } from './fixtures/order.entity';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from './helpers/databases';
import { freePort, waitFor } from './helpers/ports';

/** Every delivery that reaches a consumer (guards run before interceptors, so duplicates are counted too). */
const arrivals: Array<{ pattern: string; messageId?: string }> = [];
@Injectable()
class CountArrivals implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const pattern = String(context.switchToRpc().getContext().getPattern?.() ?? '?');
    arrivals.push({ pattern, messageId: getOutboxMessageId(context) });
    return true;
  }
}

/** A deposit applied in the default database, an invoice in the billing one, each once per message id. */
@Controller()
@UseGuards(CountArrivals)
class Consumers {
  constructor(
    private readonly orders: OutboxService,
    @InjectOutbox('billing') private readonly billing: OutboxService,
  ) {}

  @EventPattern('Deposit')
  @Idempotent()
  async onDeposit(@Payload() deposit: { amount: number }) {
    await this.orders.manager.save(TestOrder, { reference: 'deposit', amount: deposit.amount });
  }

  @EventPattern('Invoice')
  @Idempotent({ dataSource: 'billing' })
  async onInvoice(@Payload() invoice: { amount: number }) {
    await this.billing.manager.save(TestOrder, { reference: 'invoice', amount: invoice.amount });
  }
}

const SILENT: LoggerService = { log() {}, error() {}, warn() {} };

describe(`nestjs-outbox/testing with two outboxes (TCP, ${DATABASE_LABEL.sqlite}, one file per DataSource)`, () => {
  let ordersDb: TestDatabase;
  let billingDb: TestDatabase;
  let app: INestApplication | undefined;

  /** The app consumes its own messages over TCP; both outboxes publish to it; their publishers are off. */
  async function startApp(adjust: (builder: TestingModuleBuilder) => TestingModuleBuilder = (b) => b) {
    const port = await freePort();
    const tcp = { transport: Transport.TCP, options: { host: '127.0.0.1', port } };
    @Module({
      imports: [
        ...twoDataSources(ordersDb, billingDb, {
          orders: { entities: [TestOrder] },
          billing: { entities: [TestOrder] },
        }),
        ClientsModule.register([
          { name: 'ORDERS_BROKER', ...tcp },
          { name: 'BILLING_BROKER', ...tcp },
        ] as never),
        ScheduleModule.forRoot(),
        OutboxModule.forRoot({ client: 'ORDERS_BROKER', publisher: { enabled: false } }),
        OutboxModule.forRoot({ dataSource: 'billing', client: 'BILLING_BROKER', publisher: { enabled: false } }),
      ],
      controllers: [Consumers],
      providers: [CountArrivals],
    })
    class TwoOutboxKitModule {}
    // Silent like the app (logger: false): a TCP client of the previous test's app may still report its reset.
    const builder = Test.createTestingModule({ imports: [TwoOutboxKitModule] }).setLogger(SILENT);
    const moduleRef = await adjust(builder).compile();
    const nest = moduleRef.createNestApplication({ logger: false });
    nest.connectMicroservice<MicroserviceOptions>({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port, deserializer: new OutboxEnvelopeDeserializer() },
    });
    await nest.startAllMicroservices();
    await nest.init();
    return nest;
  }

  const outboxes = (nest: INestApplication) => ({
    orders: nest.get(OutboxService),
    billing: nest.get<OutboxService>(getOutboxToken(OutboxService, 'billing')),
  });
  const rows = (nest: INestApplication, dataSource: string | undefined, reference: string) =>
    nest.get<DataSource>(getDataSourceToken(dataSource)).getRepository(TestOrder).findBy({ reference });

  beforeEach(async () => {
    arrivals.length = 0;
    [ordersDb, billingDb] = await Promise.all([createTestDatabase('sqlite'), createTestDatabase('sqlite')]);
  });

  afterEach(async () => {
    await app?.close();
    app = undefined;
    await Promise.all([ordersDb.drop(), billingDb.drop()]);
  });

  it("flushOutbox(app, { outbox }) publishes that outbox's messages only; flushEveryOutbox() all of them", async () => {
    app = await startApp();
    const { orders, billing } = outboxes(app);
    const deposit = await orders.transaction(() => orders.emit('Deposit', { amount: 5 }));
    const invoices = await billing.transaction(async () => [
      await billing.emit('Invoice', { amount: 1 }),
      await billing.emit('Invoice', { amount: 2 }),
    ]);
    expect(await flushOutbox(app, { outbox: 'billing' })).toBe(2);
    expect(await orders.stats()).toMatchObject({ pending: 1 });
    await waitFor(() => arrivals.length === 2, 'the two invoices to arrive');
    expect(arrivals.map((a) => a.messageId).sort()).toEqual([...invoices].sort());
    expect(await flushOutbox(app)).toBe(1);
    await waitFor(() => arrivals.length === 3, 'the deposit to arrive');
    expect(arrivals[2]).toEqual({ pattern: 'Deposit', messageId: deposit });

    await orders.transaction(() => orders.emit('Deposit', { amount: 6 }));
    await billing.transaction(() => billing.emit('Invoice', { amount: 3 }));
    expect(await flushEveryOutbox(app)).toBe(2);
    expect((await orders.stats()).pending + (await billing.stats()).pending).toBe(0);
  });

  it('an unknown outbox name fails with OutboxConfigurationError naming the outboxes there are', async () => {
    app = await startApp();
    await expect(flushOutbox(app, { outbox: 'payroll' })).rejects.toThrow(OutboxConfigurationError);
    await expect(flushOutbox(app, { outbox: 'payroll' })).rejects.toThrow(
      "This app has no outbox of the DataSource 'payroll'; its outboxes: default, billing.",
    );
  });

  it("deliverEveryMessageTwice(builder, { outbox: 'billing' }) doubles that outbox only; its consumer applies each once", async () => {
    app = await startApp((builder) => deliverEveryMessageTwice(builder, { outbox: 'billing' }));
    const { orders, billing } = outboxes(app);
    const invoice = await billing.transaction(() => billing.emit('Invoice', { amount: 9 }));
    const deposit = await orders.transaction(() => orders.emit('Deposit', { amount: 4 }));
    expect(await flushEveryOutbox(app)).toBe(2);
    await waitFor(() => arrivals.length === 3, 'the invoice twice and the deposit once');
    expect(arrivals.filter((a) => a.pattern === 'Invoice').map((a) => a.messageId)).toEqual([invoice, invoice]);
    expect(arrivals.filter((a) => a.pattern === 'Deposit').map((a) => a.messageId)).toEqual([deposit]);
    // Let the second (skipped) invoice delivery finish before counting.
    await new Promise((r) => setTimeout(r, 200));
    expect(await rows(app, 'billing', 'invoice')).toEqual([expect.objectContaining({ amount: 9 })]);
    expect(await rows(app, undefined, 'deposit')).toEqual([expect.objectContaining({ amount: 4 })]);
  });
});
