import { Body, Controller, INestApplication, Injectable, Post } from '@nestjs/common';
import { Transactional, TransactionHost } from '@nestjs-cls/transactional';
import type { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { Idempotent, OutboxMessage, OutboxService } from '../src';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { clsTransactionalModule } from './fixtures/cls-transactional';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { TestOrder } from './fixtures/order.entity';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

const runs = { count: 0, failNext: false, gate: undefined as Promise<void> | undefined, entered: 0, advisoryLocks: -1 };

/** App code that only knows @nestjs-cls/transactional. */
@Injectable()
class OrdersService {
  constructor(
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    private readonly outbox: OutboxService,
  ) {}

  @Transactional()
  async place(reference: string) {
    runs.count++;
    const order = await this.txHost.tx.save(TestOrder, { reference, amount: 1 });
    await this.outbox.emit('OrderPlaced', { orderId: order.id });
    if (this.txHost.tx.connection.options.type === 'postgres') {
      // The key's advisory locks are held by this very transaction when @Idempotent() joined it.
      const [row] = await this.txHost.tx.query(
        `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted`,
      );
      runs.advisoryLocks = row.n;
    }
    runs.entered++;
    if (runs.gate) await runs.gate;
    if (runs.failNext) {
      runs.failNext = false;
      throw new Error('payment declined');
    }
    return { id: order.id, reference };
  }
}

@Controller('orders')
class OrdersController {
  constructor(private readonly orders: OrdersService) {}

  @Post()
  @Idempotent()
  create(@Body() body: { reference: string }) {
    return this.orders.place(body.reference);
  }
}

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(
    servicesOf(kind),
    `@Idempotent() with transactions: 'cls' (@Transactional() joins the key's transaction) on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let ds: DataSource;
      let n = 0;
      const newKey = () => `cls-${Date.now().toString(36)}-${n++}`;

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        const moduleRef = await createOutboxTestingModule({
          db,
          imports: [clsTransactionalModule()],
          providers: [OrdersService],
          controllers: [OrdersController],
          outbox: { transactions: 'cls', publisher: { enabled: false } },
        });
        app = moduleRef.createNestApplication({ logger: false });
        await app.init();
        ds = app.get(DataSource);
      });

      afterAll(async () => {
        await app?.close();
        await db?.drop();
      });

      beforeEach(() =>
        Object.assign(runs, { count: 0, failNext: false, gate: undefined, entered: 0, advisoryLocks: -1 }),
      );

      const post = (reference: string, key: string) =>
        request(app.getHttpServer()).post('/orders').set('Idempotency-Key', key).send({ reference });
      const count = async (reference: string) => ({
        orders: await ds.getRepository(TestOrder).countBy({ reference }),
        records: await ds.getRepository(IdempotencyRecord).count(),
      });

      it('commits the @Transactional() writes, the event and the key together; a retry replays', async () => {
        const key = newKey();
        const records = (await count('x')).records;
        const first = await post(`A-${key}`, key);
        expect(first.status).toBe(201);
        const again = await post(`A-${key}`, key);
        expect(again.headers['idempotent-replayed']).toBe('true');
        expect(again.body).toEqual(first.body);
        expect(runs.count).toBe(1);
        expect(await count(`A-${key}`)).toEqual({ orders: 1, records: records + 1 });
        if (kind === 'postgres') expect(runs.advisoryLocks).toBe(2);
      });

      it('rolls back the @Transactional() writes, the event and the key when the handler throws; the retry runs', async () => {
        const key = newKey();
        const events = await ds.getRepository(OutboxMessage).count();
        const records = (await count('x')).records;
        runs.failNext = true;
        expect((await post(`B-${key}`, key)).status).toBe(500);
        expect(await count(`B-${key}`)).toEqual({ orders: 0, records });
        expect(await ds.getRepository(OutboxMessage).count()).toBe(events);
        expect((await post(`B-${key}`, key)).status).toBe(201);
        expect(await count(`B-${key}`)).toEqual({ orders: 1, records: records + 1 });
        expect(runs.count).toBe(2);
      });

      if (kind !== 'sqlite') {
        it('answers 409 for the same request in flight', async () => {
          let open!: () => void;
          runs.gate = new Promise<void>((resolve) => (open = resolve));
          const key = newKey();
          const first = post(`C-${key}`, key).then((r) => r);
          await waitFor(() => runs.entered === 1, 'the first request to enter the handler');
          expect((await post(`C-${key}`, key)).status).toBe(409);
          open();
          expect((await first).status).toBe(201);
          expect(runs.count).toBe(1);
        });
      }
    },
  );
}
