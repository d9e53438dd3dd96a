import {
  BadRequestException,
  Body,
  ClassSerializerInterceptor,
  Controller,
  Get,
  HttpCode,
  INestApplication,
  Post,
  Res,
  ValidationPipe,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { HTTP_PLATFORMS, listenHttpApp } from './fixtures/http-app';
import { Exclude } from 'class-transformer';
import { IsInt, IsString, Min } from 'class-validator';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { IdempotencyKey, Idempotent, OutboxConfigurationError, OutboxMessage, OutboxService } from '../src';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { TestOrder } from './fixtures/order.entity';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

class CreateOrderDto {
  @IsString()
  reference!: string;

  @IsInt()
  @Min(1)
  amount!: number;
}

/** Returned as a class instance: `secret` must never reach the client, nor the stored record. */
class OrderView {
  id!: number;
  reference!: string;
  amount!: number;
  @Exclude()
  secret = 'internal-cost-price';
}

/** Lets a test hold a handler mid-request. */
class Gate {
  entered = 0;
  private open!: () => void;
  private opened = new Promise<void>((resolve) => (this.open = resolve));
  async pass(): Promise<void> {
    this.entered++;
    await this.opened;
  }
  release(): void {
    this.open();
  }
}

const state = { gate: new Gate(), failuresLeft: 0, runs: 0 };

@Controller('orders')
class OrdersController {
  constructor(private readonly outbox: OutboxService) {}

  @Post()
  @Idempotent()
  async create(@Body() dto: CreateOrderDto, @IdempotencyKey() key: string) {
    state.runs++;
    const order = await this.outbox.manager.save(TestOrder, { reference: dto.reference, amount: dto.amount });
    await this.outbox.emit('OrderPlaced', { orderId: order.id, amount: dto.amount });
    if (state.failuresLeft > 0) {
      state.failuresLeft--;
      throw new Error('payment provider timed out'); // after the writes: all of them must roll back
    }
    return { id: order.id, reference: order.reference, amount: order.amount, key };
  }

  @Post('slow')
  @Idempotent()
  async slow(@Body() dto: CreateOrderDto) {
    await this.outbox.transaction(async (manager) => {
      await manager.save(TestOrder, { reference: dto.reference, amount: dto.amount });
    });
    await state.gate.pass();
    return { reference: dto.reference };
  }

  @Post('view')
  @Idempotent()
  async view(@Body() dto: CreateOrderDto) {
    const order = await this.outbox.manager.save(TestOrder, { reference: dto.reference, amount: dto.amount });
    return Object.assign(new OrderView(), { id: order.id, reference: order.reference, amount: order.amount });
  }

  @Post('located')
  @HttpCode(202)
  @Idempotent()
  async located(@Body() dto: CreateOrderDto, @Res({ passthrough: true }) res: any) {
    const order = await this.outbox.manager.save(TestOrder, { reference: dto.reference, amount: dto.amount });
    res.header('Location', `/orders/${order.id}`);
    return { id: order.id };
  }

  @Post('tenant')
  @Idempotent({ scope: (context) => context.switchToHttp().getRequest().headers['x-tenant'] })
  async tenant(@Body() dto: CreateOrderDto) {
    const order = await this.outbox.manager.save(TestOrder, { reference: dto.reference, amount: dto.amount });
    return { id: order.id, reference: dto.reference };
  }

  @Post('optional')
  @Idempotent({ required: false })
  async optional(@Body() dto: CreateOrderDto) {
    const order = await this.outbox.transaction((manager) =>
      manager.save(TestOrder, { reference: dto.reference, amount: dto.amount }),
    );
    return { id: order.id };
  }

  @Post('rejecting')
  @Idempotent({ replayErrors: false })
  async rejecting(@Body() dto: CreateOrderDto) {
    await this.outbox.manager.save(TestOrder, { reference: dto.reference, amount: dto.amount });
    throw new BadRequestException('amount exceeds the credit limit');
  }

  @Get('ping')
  ping() {
    return 'pong';
  }
}

/** A class-level @Idempotent(): its POST needs a key, its GET does not; a method's options override the class's. */
@Controller('guarded')
@Idempotent({ header: 'X-Request-Key' })
class GuardedController {
  private reads = 0;

  @Get()
  read() {
    return { reads: ++this.reads };
  }

  @Post()
  write() {
    return { ok: true };
  }

  private overrides = 0;

  @Post('override')
  @Idempotent({ ttl: 60_000 })
  override() {
    return { run: ++this.overrides };
  }
}

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  for (const platform of HTTP_PLATFORMS) {
    describeWith(servicesOf(kind), `@Idempotent() over HTTP (${platform}) on ${DATABASE_LABEL[kind]}`, () => {
      let db: TestDatabase;
      let app: INestApplication;
      let ds: DataSource;
      let url: string;
      let n = 0;
      const newKey = () => `key-${platform}-${Date.now().toString(36)}-${n++}`;

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [OrdersController, GuardedController],
          outbox: { publisher: { enabled: false } },
        });
        ({ app, url } = await listenHttpApp(moduleRef, platform, {
          configure: (created) => {
            created.useGlobalPipes(new ValidationPipe({ whitelist: true }));
            created.useGlobalInterceptors(new ClassSerializerInterceptor(created.get(Reflector)));
          },
        }));
        ds = app.get(DataSource);
      });

      afterAll(async () => {
        await app?.close();
        await db?.drop();
      });

      beforeEach(() => {
        state.failuresLeft = 0;
        state.runs = 0;
      });

      const post = (path: string, body: object, key?: string, headers: Record<string, string> = {}) => {
        const r = request(url).post(path).set(headers).send(body);
        return key === undefined ? r : r.set('Idempotency-Key', key);
      };
      const orders = (reference: string) => ds.getRepository(TestOrder).countBy({ reference });
      const records = (key: string) => ds.getRepository(IdempotencyRecord).countBy({ key });

      it('runs the handler once and replays the stored response (Idempotent-Replayed: true) for the same key', async () => {
        const key = newKey();
        const first = await post('/orders', { reference: `A-${key}`, amount: 25 }, key);
        expect(first.status).toBe(201);
        expect(first.headers['idempotent-replayed']).toBeUndefined();
        expect(first.body).toEqual({ id: expect.any(Number), reference: `A-${key}`, amount: 25, key });

        // Same body with its keys in another order: the same request.
        const again = await request(url)
          .post('/orders')
          .set('Idempotency-Key', key)
          .set('Content-Type', 'application/json')
          .send(`{"amount":25,"reference":"A-${key}"}`);
        expect(again.status).toBe(201);
        expect(again.headers['idempotent-replayed']).toBe('true');
        expect(again.body).toEqual(first.body);
        expect(state.runs).toBe(1);
        expect(await orders(`A-${key}`)).toBe(1);
        expect(await ds.getRepository(OutboxMessage).count()).toBeGreaterThanOrEqual(1);
        expect(await records(key)).toBe(1);
      });

      it('treats another key with the same body as a new request', async () => {
        const body = { reference: `B-${newKey()}`, amount: 5 };
        expect((await post('/orders', body, newKey())).status).toBe(201);
        expect((await post('/orders', body, newKey())).status).toBe(201);
        expect(await orders(body.reference)).toBe(2);
      });

      it('answers 422 problem+json for the same key with a different body, and runs nothing', async () => {
        const key = newKey();
        expect((await post('/orders', { reference: `C-${key}`, amount: 10 }, key)).status).toBe(201);
        const reused = await post('/orders', { reference: `C-${key}`, amount: 11 }, key);
        expect(reused.status).toBe(422);
        expect(reused.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(reused.body).toMatchObject({
          status: 422,
          code: 'idempotency-key-reused',
          title: expect.any(String),
          detail: expect.stringContaining('new key'),
        });
        // Same key on another route is another request too.
        expect((await post('/orders/view', { reference: `C-${key}`, amount: 10 }, key)).status).toBe(422);
        expect(state.runs).toBe(1);
      });

      it('answers 400 problem+json for a missing, empty or over-long key', async () => {
        const missing = await post('/orders', { reference: 'D', amount: 1 });
        expect(missing.status).toBe(400);
        expect(missing.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(missing.body).toMatchObject({
          status: 400,
          code: 'idempotency-key-missing',
          detail: expect.stringContaining('Idempotency-Key'),
        });
        const empty = await post('/orders', { reference: 'D', amount: 1 }, '');
        expect(empty.status).toBe(400);
        expect(empty.body.code).toBe('idempotency-key-invalid');
        const long = await post('/orders', { reference: 'D', amount: 1 }, 'k'.repeat(256));
        expect(long.status).toBe(400);
        expect(long.body.code).toBe('idempotency-key-invalid');
        expect((await post('/orders', { reference: `D-${n}`, amount: 1 }, 'k'.repeat(255))).status).toBe(201);
        expect(state.runs).toBe(1);
        expect(await orders('D')).toBe(0);
      });

      it('reads a quoted RFC 8941 key without its quotes: the quoted and the bare key are one key', async () => {
        const key = newKey();
        const body = { reference: `Q-${key}`, amount: 9 };
        const quoted = await post('/orders', body, `"${key}"`);
        expect(quoted.status).toBe(201);
        expect(quoted.body.key).toBe(key);
        const bare = await post('/orders', body, key);
        expect(bare.status).toBe(201);
        expect(bare.headers['idempotent-replayed']).toBe('true');
        expect(bare.body).toEqual(quoted.body);
        const spaced = await post('/orders', body, ` "${key}" `);
        expect(spaced.headers['idempotent-replayed']).toBe('true');
        expect(state.runs).toBe(1);
        expect(await ds.getRepository(IdempotencyRecord).findOneByOrFail({ key })).toMatchObject({ key });

        const escaped = newKey();
        const first = await post('/orders', { reference: `Q-${escaped}`, amount: 9 }, `"${escaped}\\\\\\\"x"`);
        expect(first.status).toBe(201);
        expect(first.body.key).toBe(`${escaped}\\"x`);
      });

      it('answers 400 idempotency-key-invalid for a malformed quoted key, saying how to fix it, and runs nothing', async () => {
        const malformed: Array<[string, string]> = [
          ['"unterminated', 'closing double quote'],
          ['"bad\\escape"', 'backslash'],
          ['"cl\u00e9"', 'printable ASCII'],
          ['"key"garbage', 'closing double quote'],
        ];
        for (const [value, hint] of malformed) {
          const refused = await post('/orders', { reference: 'R', amount: 1 }, value);
          expect(refused.status).toBe(400);
          expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
          expect(refused.body).toMatchObject({ status: 400, code: 'idempotency-key-invalid', type: 'about:blank' });
          expect(refused.body.detail).toContain(hint);
          expect(refused.body.detail).toContain('RFC 8941');
        }
        const empty = await post('/orders', { reference: 'R', amount: 1 }, '""');
        expect(empty.status).toBe(400);
        expect(empty.body.code).toBe('idempotency-key-invalid');
        expect(state.runs).toBe(0);
        expect(await orders('R')).toBe(0);
      });

      it('runs an endpoint with required: false without a key, and guards it with one', async () => {
        const reference = `E-${newKey()}`;
        expect((await post('/orders/optional', { reference, amount: 3 })).status).toBe(201);
        const key = newKey();
        expect((await post('/orders/optional', { reference, amount: 3 }, key)).status).toBe(201);
        expect((await post('/orders/optional', { reference, amount: 3 }, key)).headers['idempotent-replayed']).toBe(
          'true',
        );
        expect(await orders(reference)).toBe(2);
      });

      it('rolls back the writes, the events and the key when the handler throws; a retry runs again', async () => {
        const key = newKey();
        const reference = `F-${key}`;
        const events = await ds.getRepository(OutboxMessage).count();
        state.failuresLeft = 1;
        const failed = await post('/orders', { reference, amount: 7 }, key);
        expect(failed.status).toBe(500);
        expect(await orders(reference)).toBe(0);
        expect(await records(key)).toBe(0);
        expect(await ds.getRepository(OutboxMessage).count()).toBe(events);

        const retried = await post('/orders', { reference, amount: 7 }, key);
        expect(retried.status).toBe(201);
        expect(retried.headers['idempotent-replayed']).toBeUndefined();
        expect(await orders(reference)).toBe(1);
        expect(await records(key)).toBe(1);
        expect(await ds.getRepository(OutboxMessage).count()).toBe(events + 1);
        expect(state.runs).toBe(2);
      });

      it('stores nothing for an HttpException under replayErrors: false or a ValidationPipe 400 (not started): the key stays free', async () => {
        const key = newKey();
        const rejected = await post('/orders/rejecting', { reference: `G-${key}`, amount: 1 }, key);
        expect(rejected.status).toBe(400);
        expect(rejected.body.message).toBe('amount exceeds the credit limit');
        expect(await orders(`G-${key}`)).toBe(0);
        expect(await records(key)).toBe(0);

        const key2 = newKey();
        const invalid = await post('/orders', { reference: `G-${key2}`, amount: 'lots' }, key2);
        expect(invalid.status).toBe(400);
        expect(await records(key2)).toBe(0);
        const valid = await post('/orders', { reference: `G-${key2}`, amount: 2 }, key2);
        expect(valid.status).toBe(201);
        expect(valid.headers['idempotent-replayed']).toBeUndefined();
      });

      it('stores and replays the serialized body (hidden fields never stored) and the selected headers and status', async () => {
        const key = newKey();
        const first = await post('/orders/view', { reference: `H-${key}`, amount: 4 }, key);
        expect(first.status).toBe(201);
        expect(first.body.secret).toBeUndefined();
        const record = await ds.getRepository(IdempotencyRecord).findOneByOrFail({ key });
        expect(record.responseBody).not.toContain('internal-cost-price');
        expect(record.responseStatus).toBe(201);
        expect(record.expiresAt.getTime() - record.createdAt.getTime()).toBe(86_400_000);
        const replay = await post('/orders/view', { reference: `H-${key}`, amount: 4 }, key);
        expect(replay.body).toEqual(first.body);

        const key2 = newKey();
        const located = await post('/orders/located', { reference: `H-${key2}`, amount: 4 }, key2);
        expect(located.status).toBe(202);
        expect(located.headers.location).toBe(`/orders/${located.body.id}`);
        const replayed = await post('/orders/located', { reference: `H-${key2}`, amount: 4 }, key2);
        expect(replayed.status).toBe(202);
        expect(replayed.headers['idempotent-replayed']).toBe('true');
        expect(replayed.headers.location).toBe(`/orders/${located.body.id}`);
        expect(replayed.body).toEqual(located.body);
      });

      it('keeps scopes apart: the same key under two tenants is two records, and neither sees the other’s response', async () => {
        const key = newKey();
        const acme = await post('/orders/tenant', { reference: `I-acme`, amount: 1 }, key, { 'x-tenant': 'acme' });
        const globex = await post('/orders/tenant', { reference: `I-globex`, amount: 1 }, key, {
          'x-tenant': 'globex',
        });
        expect(acme.status).toBe(201);
        expect(globex.status).toBe(201);
        expect(globex.headers['idempotent-replayed']).toBeUndefined();
        expect(globex.body.reference).toBe('I-globex');
        expect(await records(key)).toBe(2);
        const acmeAgain = await post('/orders/tenant', { reference: `I-acme`, amount: 1 }, key, { 'x-tenant': 'acme' });
        expect(acmeAgain.body).toEqual(acme.body);
        expect(acmeAgain.headers['idempotent-replayed']).toBe('true');
      });

      if (kind !== 'sqlite') {
        it('answers 409 with Retry-After at once while the same request is in flight, 422 for a different one; then replays', async () => {
          state.gate = new Gate();
          const key = newKey();
          const body = { reference: `J-${key}`, amount: 9 };
          const first = post('/orders/slow', body, key).then((r) => r);
          await waitFor(() => state.gate.entered === 1, 'the first request to enter the handler');
          const second = await post('/orders/slow', body, key);
          expect(second.status).toBe(409);
          expect(second.headers['retry-after']).toBe('1');
          expect(second.body).toMatchObject({ status: 409, code: 'idempotency-key-in-use' });
          // A different request with the same key wins over "in flight": 422, also while the first is running.
          const different = await post('/orders/slow', { ...body, amount: 10 }, key);
          expect(different.status).toBe(422);
          expect(different.body.code).toBe('idempotency-key-reused');
          state.gate.release();
          expect((await first).status).toBe(201);
          const third = await post('/orders/slow', body, key);
          expect(third.headers['idempotent-replayed']).toBe('true');
          expect(state.gate.entered).toBe(1);
          expect(await orders(body.reference)).toBe(1);
        });

        it('50 concurrent requests with one key: exactly one effect; the others replay or get 409; no 5xx', async () => {
          const key = newKey();
          const body = { reference: `K-${key}`, amount: 50 };
          const responses = await Promise.all(Array.from({ length: 50 }, () => post('/orders', body, key)));
          const statuses = responses.map((r) => r.status);
          expect(statuses.filter((s) => s >= 500)).toEqual([]);
          expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
          const fresh = responses.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined);
          expect(fresh).toHaveLength(1);
          for (const r of responses.filter((x) => x.status === 201)) expect(r.body).toEqual(fresh[0].body);
          expect(await orders(body.reference)).toBe(1);
          expect(await records(key)).toBe(1);
          expect(state.runs).toBe(1);
        });
      } else {
        it('serializes a concurrent duplicate on SQLite: it waits for the first and replays it', async () => {
          state.gate = new Gate();
          const key = newKey();
          const body = { reference: `J-${key}`, amount: 9 };
          const first = post('/orders/slow', body, key).then((r) => r);
          await waitFor(() => state.gate.entered === 1, 'the first request to enter the handler');
          const second = post('/orders/slow', body, key).then((r) => r);
          state.gate.release();
          expect((await first).status).toBe(201);
          const replay = await second;
          expect(replay.status).toBe(201);
          expect(replay.headers['idempotent-replayed']).toBe('true');
          expect(state.gate.entered).toBe(1);
          expect(await orders(body.reference)).toBe(1);
        });
      }

      it('leaves routes without @Idempotent() alone, and lets safe methods (GET) of a guarded controller through without a key', async () => {
        const res = await request(url).get('/orders/ping');
        expect(res.status).toBe(200);
        expect(res.text).toBe('pong');
        const read = await request(url).get('/guarded');
        expect(read.status).toBe(200);
        expect(read.body).toEqual({ reads: expect.any(Number) });
        expect((await request(url).post('/guarded').send({})).status).toBe(400);
      });

      it('merges module ← class ← method options, and guards once when both the class and the method are decorated', async () => {
        const key = newKey();
        const missing = await request(url).post('/guarded').set('Idempotency-Key', key).send({});
        expect(missing.status).toBe(400);
        expect(missing.body.detail).toContain('X-Request-Key');
        const first = await request(url).post('/guarded/override').set('X-Request-Key', key).send({});
        expect(first.status).toBe(201);
        const again = await request(url).post('/guarded/override').set('X-Request-Key', key).send({});
        expect(again.headers['idempotent-replayed']).toBe('true');
        expect(again.body).toEqual(first.body);
        const record = await ds.getRepository(IdempotencyRecord).findOneByOrFail({ key });
        expect(record.expiresAt.getTime() - record.createdAt.getTime()).toBe(60_000);
      });
    });
  }
}

describe('@Idempotent() refuses handlers that write the response themselves', () => {
  it('throws OutboxConfigurationError for @Res() without passthrough, naming the fix', () => {
    expect(() => {
      @Controller()
      class RawController {
        @Post()
        @Idempotent()
        raw(@Res() res: any) {
          res.send('x');
        }
      }
      return RawController;
    }).toThrow(OutboxConfigurationError);
    expect(() => {
      @Controller()
      @Idempotent()
      class RawController {
        @Post()
        raw(@Res() res: any) {
          res.send('x');
        }
      }
      return RawController;
    }).toThrow(/passthrough: true/);
  });
});
