import {
  Body,
  ConflictException,
  Controller,
  HttpException,
  HttpStatus,
  INestApplication,
  InternalServerErrorException,
  Post,
  ValidationPipe,
} from '@nestjs/common';
import { HTTP_PLATFORMS, listenHttpApp } from './fixtures/http-app';
import { IsInt, IsString, Min } from 'class-validator';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { Idempotent, OutboxService } from '../src';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { TestOrder } from './fixtures/order.entity';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { describeWith } from './helpers/services';

class PaymentDto {
  @IsString()
  reference!: string;

  @IsInt()
  @Min(1)
  amount!: number;
}

/** Calls per route, and how many of the next calls fail. */
const calls: Record<string, number> = {};
const state = { failuresLeft: 0 };

const DECLINED = { type: 'card_declined', message: 'Your card was declined.', decline_code: 'insufficient_funds' };

@Controller('payments')
class PaymentsController {
  constructor(private readonly outbox: OutboxService) {}

  /** Writes its effect, then declines: the effect must roll back, the 402 is the outcome. */
  private async charge(route: string, dto: PaymentDto): Promise<void> {
    calls[route] = (calls[route] ?? 0) + 1;
    await this.outbox.manager.save(TestOrder, { reference: dto.reference, amount: dto.amount });
  }

  @Post('declined')
  @Idempotent()
  async declined(@Body() dto: PaymentDto) {
    await this.charge('declined', dto);
    throw new HttpException(DECLINED, HttpStatus.PAYMENT_REQUIRED);
  }

  @Post('not-found')
  @Idempotent()
  async notFound(@Body() dto: PaymentDto) {
    await this.charge('not-found', dto);
    throw new HttpException('no such customer', HttpStatus.NOT_FOUND);
  }

  @Post('flaky')
  @Idempotent()
  async flaky(@Body() dto: PaymentDto) {
    await this.charge('flaky', dto);
    if (state.failuresLeft > 0) {
      state.failuresLeft--;
      throw new InternalServerErrorException('the provider is down');
    }
    return { reference: dto.reference, charged: true };
  }

  @Post('busy')
  @Idempotent()
  async busy(@Body() dto: PaymentDto) {
    await this.charge('busy', dto);
    if (state.failuresLeft > 0) {
      state.failuresLeft--;
      throw dto.amount === 409
        ? new ConflictException('the account is being updated')
        : new HttpException('slow down', HttpStatus.TOO_MANY_REQUESTS);
    }
    return { reference: dto.reference, charged: true };
  }

  @Post('opted-out')
  @Idempotent({ replayErrors: false })
  async optedOut(@Body() dto: PaymentDto) {
    await this.charge('opted-out', dto);
    throw new HttpException(DECLINED, HttpStatus.PAYMENT_REQUIRED);
  }

  @Post('only-404')
  @Idempotent({ replayErrors: (error) => error instanceof HttpException && error.getStatus() === 404 })
  async only404(@Body() dto: PaymentDto) {
    await this.charge('only-404', dto);
    throw new HttpException(DECLINED, HttpStatus.PAYMENT_REQUIRED);
  }
}

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  for (const platform of HTTP_PLATFORMS) {
    const title = `@Idempotent() replays final failures (${platform}) on ${DATABASE_LABEL[kind]}`;
    describeWith(servicesOf(kind), title, () => {
      let db: TestDatabase;
      let app: INestApplication;
      let ds: DataSource;
      let url: string;
      let n = 0;
      const newKey = () => `fail-${platform}-${Date.now().toString(36)}-${n++}`;

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [PaymentsController],
          outbox: { publisher: { enabled: false } },
        });
        ({ app, url } = await listenHttpApp(moduleRef, platform, {
          configure: (created) => created.useGlobalPipes(new ValidationPipe({ whitelist: true })),
        }));
        ds = app.get(DataSource);
      });

      afterAll(async () => {
        await app?.close();
        await db?.drop();
      });

      beforeEach(() => {
        for (const route of Object.keys(calls)) delete calls[route];
        state.failuresLeft = 0;
      });

      const post = (path: string, body: object, key: string) =>
        request(url).post(`/payments/${path}`).set('Idempotency-Key', key).send(body);
      const effects = (reference: string) => ds.getRepository(TestOrder).countBy({ reference });
      const records = (key: string) => ds.getRepository(IdempotencyRecord).countBy({ key });

      it('replays a declined payment (402, same body, Idempotent-Replayed); the handler does not rerun', async () => {
        const key = newKey();
        const body = { reference: `P-${key}`, amount: 25 };
        const first = await post('declined', body, key);
        expect(first.status).toBe(402);
        expect(first.body).toEqual(DECLINED);
        expect(first.headers['idempotent-replayed']).toBeUndefined();
        expect(await effects(body.reference)).toBe(0); // the effect rolled back
        expect(await records(key)).toBe(1); // the outcome was kept

        const retried = await post('declined', body, key);
        expect(retried.status).toBe(402);
        expect(retried.body).toEqual(first.body);
        expect(retried.headers['idempotent-replayed']).toBe('true');
        expect(calls.declined).toBe(1);
        expect(await effects(body.reference)).toBe(0);

        // The kept failure belongs to this request only: another body with the key is refused.
        expect((await post('declined', { ...body, amount: 26 }, key)).status).toBe(422);
        expect(calls.declined).toBe(1);
      });

      it('replays a string-message 4xx as Nest sent it ({ statusCode, message })', async () => {
        const key = newKey();
        const first = await post('not-found', { reference: `N-${key}`, amount: 1 }, key);
        expect(first.status).toBe(404);
        const retried = await post('not-found', { reference: `N-${key}`, amount: 1 }, key);
        expect(retried.status).toBe(404);
        expect(retried.headers['idempotent-replayed']).toBe('true');
        expect(retried.body).toEqual(first.body);
        expect(retried.body).toEqual({ statusCode: 404, message: 'no such customer' });
        expect(calls['not-found']).toBe(1);
      });

      it('frees the key on a 500: the retry runs the handler again and its success is kept', async () => {
        const key = newKey();
        const body = { reference: `S-${key}`, amount: 5 };
        state.failuresLeft = 1;
        const failed = await post('flaky', body, key);
        expect(failed.status).toBe(500);
        expect(await records(key)).toBe(0);
        expect(await effects(body.reference)).toBe(0);

        const retried = await post('flaky', body, key);
        expect(retried.status).toBe(201);
        expect(retried.headers['idempotent-replayed']).toBeUndefined();
        expect(calls.flaky).toBe(2);
        expect(await effects(body.reference)).toBe(1);
      });

      it.each([409, 429])('keeps no %i thrown by the handler: a retry runs again', async (status) => {
        const key = newKey();
        const body = { reference: `B-${key}`, amount: status };
        state.failuresLeft = 1;
        const failed = await post('busy', body, key);
        expect(failed.status).toBe(status);
        expect(await records(key)).toBe(0);

        const retried = await post('busy', body, key);
        expect(retried.status).toBe(201);
        expect(retried.headers['idempotent-replayed']).toBeUndefined();
        expect(calls.busy).toBe(2);
      });

      it('keeps no ValidationPipe 400 (the handler never started): a retry with a valid body runs', async () => {
        const key = newKey();
        const invalid = await post('declined', { reference: `V-${key}`, amount: 'lots' }, key);
        expect(invalid.status).toBe(400);
        expect(calls.declined).toBeUndefined();
        expect(await records(key)).toBe(0);

        const valid = await post('declined', { reference: `V-${key}`, amount: 3 }, key);
        expect(valid.status).toBe(402);
        expect(valid.headers['idempotent-replayed']).toBeUndefined();
        expect(calls.declined).toBe(1);
      });

      it('keeps nothing on a route with replayErrors: false, and only what its function accepts', async () => {
        const key = newKey();
        const body = { reference: `O-${key}`, amount: 2 };
        expect((await post('opted-out', body, key)).status).toBe(402);
        expect(await records(key)).toBe(0);
        const again = await post('opted-out', body, key);
        expect(again.status).toBe(402);
        expect(again.headers['idempotent-replayed']).toBeUndefined();
        expect(calls['opted-out']).toBe(2);

        const key2 = newKey();
        expect((await post('only-404', body, key2)).status).toBe(402);
        expect(await records(key2)).toBe(0);
        expect((await post('only-404', body, key2)).headers['idempotent-replayed']).toBeUndefined();
        expect(calls['only-404']).toBe(2);
      });

      it('concurrent first attempts of a declined payment: one record, every answer the 402 or a 409', async () => {
        const key = newKey();
        const body = { reference: `C-${key}`, amount: 7 };
        const answers = await Promise.all(Array.from({ length: 8 }, () => post('declined', body, key)));
        for (const answer of answers) expect([402, 409]).toContain(answer.status);
        for (const answer of answers.filter((a) => a.status === 402)) expect(answer.body).toEqual(DECLINED);
        expect(await records(key)).toBe(1);
        expect(await effects(body.reference)).toBe(0);
        const later = await post('declined', body, key);
        expect(later.status).toBe(402);
        expect(later.headers['idempotent-replayed']).toBe('true');
      });
    });
  }
}

for (const kind of kinds) {
  describeWith(servicesOf(kind), `replayErrors: false module-wide on ${DATABASE_LABEL[kind]}`, () => {
    let db: TestDatabase;
    let app: INestApplication;
    let url: string;

    beforeAll(async () => {
      db = await createTestDatabase(kind);
      const moduleRef = await createOutboxTestingModule({
        db,
        controllers: [PaymentsController],
        outbox: { publisher: { enabled: false }, idempotency: { replayErrors: false } },
      });
      ({ app, url } = await listenHttpApp(moduleRef));
    });

    afterAll(async () => {
      await app?.close();
      await db?.drop();
    });

    it('keeps no failure: a declined payment runs again on retry', async () => {
      delete calls.declined;
      const key = `module-${Date.now().toString(36)}`;
      const body = { reference: `M-${key}`, amount: 4 };
      const post = () => request(url).post('/payments/declined').set('Idempotency-Key', key).send(body);
      expect((await post()).status).toBe(402);
      const again = await post();
      expect(again.status).toBe(402);
      expect(again.headers['idempotent-replayed']).toBeUndefined();
      expect(calls.declined).toBe(2);
      expect(await app.get(DataSource).getRepository(IdempotencyRecord).countBy({ key })).toBe(0);
    });
  });
}
