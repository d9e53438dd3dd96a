import {
  Body,
  CallHandler,
  Controller,
  ExecutionContext,
  Get,
  INestApplication,
  Injectable,
  NestInterceptor,
  Post,
  UseInterceptors,
  ValidationPipe,
} from '@nestjs/common';
import { INTERCEPTORS_METADATA, SELF_DECLARED_DEPS_METADATA } from '@nestjs/common/constants';
import { IsInt, IsString, Min } from 'class-validator';
import { map, Observable, of } from 'rxjs';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { getOutboxToken, IdempotencyKey, Idempotent, OutboxService } from '../src';
import { IdempotencyInterceptor } from '../src/idempotency/idempotency.interceptor';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { IdempotencyService } from '../src/idempotency/idempotency.service';
import { HTTP_PLATFORMS, listenHttpApp } from './fixtures/http-app';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { TestOrder } from './fixtures/order.entity';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { describeWith } from './helpers/services';

/**
 * `@Idempotent()` on HTTP route methods, in either decorator order: one mechanism, `IdempotencyInterceptor`, put
 * first among the method's interceptors. These tests check that the handler gets exactly the arguments it declares,
 * that the key is refused before the pipes and that a request the pipes reject records nothing, that the key is
 * claimed before the app's own method interceptor runs (what it answers is stored and replayed, and it runs once),
 * that the app's global interceptor wraps the answer and the replay once, and that concurrent duplicates still apply
 * once — over Express and Fastify and a real database.
 */

class OrderDto {
  @IsString()
  reference!: string;

  @IsInt()
  @Min(1)
  amount!: number;
}

const runs: Record<string, number> = {};
const count = (name: string) => (runs[name] = (runs[name] ?? 0) + 1);

/** An app's own interceptor, around everything (global): wraps every answer in `{ data }`. */
@Injectable()
class Envelope implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(map((data) => ({ data })));
  }
}

/** An app's own interceptor on one route: marks the answer it sees, and counts its runs. */
@Injectable()
class Stamp implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    count('Stamp');
    return next.handle().pipe(map((value) => ({ ...(value as object), stamped: true })));
  }
}

@Controller('routes')
class RouteHandlers {
  constructor(private readonly outbox: OutboxService) {}

  /** `@Idempotent()` below the route, with @Body and @IdempotencyKey: the handler gets those two, nothing more. */
  @Post('declared')
  @Idempotent()
  async declared(@Body() dto: OrderDto, @IdempotencyKey() key: string) {
    const received = arguments.length;
    await this.outbox.manager.save(TestOrder, { reference: dto.reference, amount: dto.amount });
    return { run: count(`declared ${dto.reference}`), received, key, amount: dto.amount };
  }

  /** `@Idempotent()` above the route, no parameter decorators: called with no arguments, as Nest calls it. */
  @Idempotent()
  @Post('bare')
  bare() {
    return { run: count('bare'), received: arguments.length };
  }

  /** An Observable answer: its last value is stored and replayed. */
  @Post('observable')
  @Idempotent()
  observable(@Body() dto: OrderDto) {
    return of({ run: count(`observable ${dto.reference}`) });
  }

  /** The app's own method interceptor, declared below `@Idempotent()`: it runs after the key is claimed. */
  @Post('stamped')
  @Idempotent()
  @UseInterceptors(Stamp)
  stamped(@Body() dto: OrderDto) {
    return { run: count(`stamped ${dto.reference}`) };
  }

  /** A safe method on a guarded route: no key is read, the handler runs each time. */
  @Get('read')
  @Idempotent()
  read() {
    return { run: count('read') };
  }

  /** An optional key: without one the handler runs unguarded. */
  @Post('optional')
  @Idempotent({ required: false })
  optional(@Body() dto: OrderDto) {
    return { run: count(`optional ${dto.reference}`) };
  }

  /** Slow enough that concurrent duplicates overlap. */
  @Post('slow')
  @Idempotent()
  async slow(@Body() dto: OrderDto) {
    count(`slow ${dto.reference}`);
    await this.outbox.manager.save(TestOrder, { reference: dto.reference, amount: dto.amount });
    await new Promise((resolve) => setTimeout(resolve, 150));
    return { reference: dto.reference };
  }
}

@Controller('billing-routes')
class BillingRoutes {
  @Post()
  @Idempotent({ dataSource: 'billing' })
  charge() {
    return { ok: true };
  }
}

describe('@Idempotent() on HTTP routes (metadata)', () => {
  const interceptors = (method: Function) => Reflect.getMetadata(INTERCEPTORS_METADATA, method) ?? [];

  it('guards a route through the interceptor, in either decorator order, first among the method’s own', () => {
    for (const method of [RouteHandlers.prototype.declared, RouteHandlers.prototype.bare]) {
      expect(interceptors(method)).toEqual([IdempotencyInterceptor]);
    }
    expect(interceptors(RouteHandlers.prototype.stamped)).toEqual([IdempotencyInterceptor, Stamp]);
  });

  it('gives @Idempotent({ dataSource }) the interceptor that is injected with that outbox’s IdempotencyService', () => {
    const [interceptor] = interceptors(BillingRoutes.prototype.charge);
    expect(interceptor.name).toBe('IdempotencyInterceptor(billing)');
    const injected = (Reflect.getMetadata(SELF_DECLARED_DEPS_METADATA, interceptor) ?? []).map((d: any) => d.param);
    expect(injected).toContain(getOutboxToken(IdempotencyService, 'billing'));
  });
});

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  for (const platform of HTTP_PLATFORMS) {
    describeWith(servicesOf(kind), `@Idempotent() HTTP routes (${platform}) on ${DATABASE_LABEL[kind]}`, () => {
      let db: TestDatabase;
      let app: INestApplication;
      let ds: DataSource;
      let url: string;
      let n = 0;
      const newKey = () => `route-${platform}-${Date.now().toString(36)}-${n++}`;

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [RouteHandlers],
          outbox: { publisher: { enabled: false } },
        });
        ({ app, url } = await listenHttpApp(moduleRef, platform, {
          configure: (created) => {
            created.useGlobalPipes(new ValidationPipe({ whitelist: true }));
            created.useGlobalInterceptors(new Envelope());
          },
        }));
        ds = app.get(DataSource);
      });

      afterAll(async () => {
        await app?.close();
        await db?.drop();
      });

      const post = (path: string, body: object, key?: string) => {
        const call = request(url).post(`/routes/${path}`).send(body);
        return key === undefined ? call : call.set('Idempotency-Key', key);
      };
      const records = (key: string) => ds.getRepository(IdempotencyRecord).countBy({ key });
      const effects = (reference: string) => ds.getRepository(TestOrder).countBy({ reference });

      it('hands the handler exactly its declared arguments, the key included, and replays its answer', async () => {
        const key = newKey();
        const body = { reference: `D-${key}`, amount: 7 };
        const first = await post('declared', body, key);
        expect(first.status).toBe(201);
        expect(first.body).toEqual({ data: { run: 1, received: 2, key, amount: 7 } });
        const retried = await post('declared', body, key);
        expect(retried.status).toBe(201);
        expect(retried.headers['idempotent-replayed']).toBe('true');
        expect(retried.body).toEqual(first.body); // wrapped once by the app's interceptor, not twice
        expect(await effects(body.reference)).toBe(1);
        expect(runs[`declared ${body.reference}`]).toBe(1);
      });

      it('calls a handler without parameter decorators with no arguments', async () => {
        const key = newKey();
        const first = await post('bare', {}, key);
        expect(first.status).toBe(201);
        expect(first.body.data.received).toBe(0);
        const retried = await post('bare', {}, key);
        expect(retried.body).toEqual(first.body);
        expect(retried.headers['idempotent-replayed']).toBe('true');
      });

      it('stores and replays the last value of an Observable answer', async () => {
        const key = newKey();
        const body = { reference: `O-${key}`, amount: 1 };
        const first = await post('observable', body, key);
        expect(first.status).toBe(201);
        expect(first.body).toEqual({ data: { run: 1 } });
        const retried = await post('observable', body, key);
        expect(retried.body).toEqual({ data: { run: 1 } });
        expect(retried.headers['idempotent-replayed']).toBe('true');
        expect(await records(key)).toBe(1);
      });

      it('claims the key before the app’s method interceptor runs: its answer is stored and replayed, it runs once', async () => {
        const key = newKey();
        const body = { reference: `S-${key}`, amount: 1 };
        const stamps = runs.Stamp ?? 0;
        const first = await post('stamped', body, key);
        expect(first.body).toEqual({ data: { run: 1, stamped: true } });
        const retried = await post('stamped', body, key);
        expect(retried.body).toEqual(first.body); // wrapped once by the global interceptor, stamped once
        expect(retried.headers['idempotent-replayed']).toBe('true');
        expect(runs.Stamp).toBe(stamps + 1); // the replay is answered before the method's own interceptor
        // What was stored is what the method's interceptor answered, inside the key's guard.
        const [record] = await ds.getRepository(IdempotencyRecord).findBy({ key });
        expect(JSON.parse(record.responseBody!)).toEqual({ run: 1, stamped: true });
      });

      it('refuses a missing key before the pipes run (the key’s 400, not the validation’s)', async () => {
        const response = await post('declared', { reference: 42 });
        expect(response.status).toBe(400);
        expect(response.headers['content-type']).toMatch(/application\/problem\+json/);
        expect(response.body.code).toBe('idempotency-key-missing');
        expect(response.body.detail).toMatch(/requires an Idempotency-Key header/);
      });

      it('claims no key for a request the pipes reject; the corrected retry with the key runs', async () => {
        const key = newKey();
        const rejected = await post('declared', { reference: `V-${key}`, amount: 0 }, key);
        expect(rejected.status).toBe(400);
        expect(rejected.headers['content-type']).not.toMatch(/problem\+json/); // the ValidationPipe's own answer
        expect(await records(key)).toBe(0);
        const corrected = await post('declared', { reference: `V-${key}`, amount: 3 }, key);
        expect(corrected.status).toBe(201);
        expect(corrected.headers['idempotent-replayed']).toBeUndefined();
        expect(await records(key)).toBe(1);
      });

      it('runs a safe method and a request without an optional key unguarded', async () => {
        const key = newKey();
        for (let i = 1; i <= 2; i++) {
          const read = await request(url).get('/routes/read').set('Idempotency-Key', key);
          expect(read.status).toBe(200);
          expect(read.headers['idempotent-replayed']).toBeUndefined();
        }
        expect(await records(key)).toBe(0);
        const body = { reference: `U-${key}`, amount: 1 };
        expect((await post('optional', body)).body).toEqual({ data: { run: 1 } });
        expect((await post('optional', body)).body).toEqual({ data: { run: 2 } });
      });

      it('applies ten concurrent requests with one key once; the others are refused (409) or replayed', async () => {
        const key = newKey();
        const body = { reference: `C-${key}`, amount: 2 };
        const answers = await Promise.all(Array.from({ length: 10 }, () => post('slow', body, key)));
        const statuses = answers.map((answer) => answer.status);
        expect(statuses.every((status) => status === 201 || status === 409)).toBe(true);
        const fresh = answers.filter((a) => a.status === 201 && a.headers['idempotent-replayed'] === undefined);
        expect(fresh).toHaveLength(1);
        expect(runs[`slow ${body.reference}`]).toBe(1);
        expect(await effects(body.reference)).toBe(1);
        expect(await records(key)).toBe(1);
      });
    });
  }
}
