import { Body, Controller, HttpException, INestApplication, Injectable, Post } from '@nestjs/common';
import { Transactional, TransactionHost } from '@nestjs-cls/transactional';
import type { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { Idempotent, idempotentStep } from '../src';
import { IdempotencyStep } from '../src/schema/idempotency-step.entity';
import { clsTransactionalModule } from './fixtures/cls-transactional';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { TestOrder } from './fixtures/order.entity';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { describeWith } from './helpers/services';

const seen = { providerCalls: 0, failNext: 0 };

/** App code that only knows @nestjs-cls/transactional, calling a step from a service. */
@Injectable()
class CheckoutService {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  @Transactional()
  async checkout(reference: string) {
    const charge = await idempotentStep('charge', (stepKey) => ({ id: `ch_${++seen.providerCalls}`, stepKey }));
    if (seen.failNext > 0) {
      seen.failNext--;
      throw new Error('failed after the step');
    }
    await this.txHost.tx.save(TestOrder, { reference, amount: 1 });
    return { reference, chargeId: charge.id };
  }
}

@Controller('checkouts')
class CheckoutController {
  constructor(private readonly checkouts: CheckoutService) {}

  @Post()
  @Idempotent()
  create(@Body() body: { reference: string }) {
    return this.checkouts.checkout(body.reference);
  }

  /** A declined charge recorded by a step, answered 402: a final failure, kept and replayed under 'cls' too. */
  @Post('declined')
  @Idempotent()
  async declined() {
    const outcome = await idempotentStep('charge', () => ({ declined: true, call: ++seen.providerCalls }));
    throw new HttpException(outcome, 402);
  }
}

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(servicesOf(kind), `idempotentStep() with transactions: 'cls' on ${DATABASE_LABEL[kind]}`, () => {
    let db: TestDatabase;
    let app: INestApplication;

    beforeAll(async () => {
      db = await createTestDatabase(kind);
      const moduleRef = await createOutboxTestingModule({
        db,
        imports: [clsTransactionalModule()],
        providers: [CheckoutService],
        controllers: [CheckoutController],
        outbox: { transactions: 'cls', publisher: { enabled: false } },
      });
      app = moduleRef.createNestApplication({ logger: false });
      await app.init();
    });

    afterAll(async () => {
      await app?.close();
      await db?.drop();
    });

    it('a run that failed after its step is resumed by the retry without calling again', async () => {
      const key = `cls-step-${kind}-${Date.now().toString(36)}`;
      const post = () =>
        request(app.getHttpServer()).post('/checkouts').set('Idempotency-Key', key).send({ reference: key });
      seen.failNext = 1;
      expect((await post()).status).toBe(500);
      const ds = app.get(DataSource);
      expect(await ds.getRepository(IdempotencyStep).countBy({ key })).toBe(1);
      expect(await ds.getRepository(TestOrder).countBy({ reference: key })).toBe(0);
      const calls = seen.providerCalls;

      const resumed = await post();
      expect(resumed.status).toBe(201);
      expect(resumed.body).toEqual({ reference: key, chargeId: `ch_${calls}` });
      expect(seen.providerCalls).toBe(calls);
      expect(await ds.getRepository(TestOrder).countBy({ reference: key })).toBe(1);
    });

    it('a 402 after a step is kept and replayed (the handler start is seen inside the source transaction)', async () => {
      const key = `cls-declined-${kind}-${Date.now().toString(36)}`;
      const post = () => request(app.getHttpServer()).post('/checkouts/declined').set('Idempotency-Key', key).send({});
      const first = await post();
      expect(first.status).toBe(402);
      const calls = seen.providerCalls;
      const again = await post();
      expect(again.status).toBe(402);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toEqual(first.body);
      expect(seen.providerCalls).toBe(calls);
    });
  });
}
