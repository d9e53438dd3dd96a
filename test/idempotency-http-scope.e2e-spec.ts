import {
  Body,
  CanActivate,
  Controller,
  ExecutionContext,
  INestApplication,
  Injectable,
  LoggerService,
  Post,
  Req,
  UseGuards,
} from '@nestjs/common';
import { HTTP_PLATFORMS, listenHttpApp } from './fixtures/http-app';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { Idempotent, OutboxService } from '../src';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { TestOrder } from './fixtures/order.entity';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { describeWith } from './helpers/services';

/** Sets `request.user` from the JSON of the `x-user` header, as a Passport or JWT guard would; none without it. */
@Injectable()
class HeaderUserGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest();
    const header = req.headers['x-user'];
    if (typeof header === 'string') req.user = JSON.parse(header);
    return true;
  }
}

type Order = { reference: string; amount: number };
const runs = { count: 0 };

/** Writes an order and answers who placed it: a replay to another user would show the first user's order. */
async function place(outbox: OutboxService, dto: Order, req: any) {
  runs.count++;
  const order = await outbox.manager.save(TestOrder, { reference: dto.reference, amount: dto.amount });
  const user = req.user ?? {};
  return { id: order.id, reference: order.reference, placedBy: String(user.id ?? user.sub ?? 'nobody') };
}

@Controller('scoped')
@UseGuards(HeaderUserGuard)
class ScopedController {
  constructor(private readonly outbox: OutboxService) {}

  @Post('orders')
  @Idempotent()
  create(@Body() dto: Order, @Req() req: any) {
    return place(this.outbox, dto, req);
  }

  @Post('tenant')
  @Idempotent({ scope: (context) => context.switchToHttp().getRequest().headers['x-tenant'] })
  tenant(@Body() dto: Order, @Req() req: any) {
    return place(this.outbox, dto, req);
  }
}

@Controller('open')
class OpenController {
  constructor(private readonly outbox: OutboxService) {}

  @Post('orders')
  @Idempotent()
  create(@Body() dto: Order, @Req() req: any) {
    return place(this.outbox, dto, req);
  }

  @Post('other')
  @Idempotent()
  other(@Body() dto: Order, @Req() req: any) {
    return place(this.outbox, dto, req);
  }

  @Post('tenant')
  @Idempotent({ scope: (context) => context.switchToHttp().getRequest().headers['x-tenant'] })
  tenant(@Body() dto: Order, @Req() req: any) {
    return place(this.outbox, dto, req);
  }
}

/** Keeps every warning the app logs. */
class RecordingLogger implements LoggerService {
  readonly warnings: string[] = [];
  log(): void {}
  error(): void {}
  debug(): void {}
  verbose(): void {}
  warn(message: unknown): void {
    this.warnings.push(String(message));
  }
}

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  for (const platform of HTTP_PLATFORMS) {
    describeWith(servicesOf(kind), `@Idempotent() HTTP key scope (${platform}) on ${DATABASE_LABEL[kind]}`, () => {
      let db: TestDatabase;
      let app: INestApplication;
      let ds: DataSource;
      let url: string;
      const logger = new RecordingLogger();
      let n = 0;
      const newKey = () => `scope-${platform}-${Date.now().toString(36)}-${n++}`;

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [ScopedController, OpenController],
          outbox: { publisher: { enabled: false } },
        });
        ({ app, url } = await listenHttpApp(moduleRef, platform, { logger }));
        ds = app.get(DataSource);
      });

      afterAll(async () => {
        await app?.close();
        await db?.drop();
      });

      beforeEach(() => {
        runs.count = 0;
      });

      const post = (path: string, body: Order, key: string, headers: Record<string, string> = {}) =>
        request(url).post(path).set('Idempotency-Key', key).set(headers).send(body);
      const as = (user: object) => ({ 'x-user': JSON.stringify(user) });
      const scopesOf = async (key: string) =>
        (await ds.getRepository(IdempotencyRecord).findBy({ key })).map((r) => r.scope).sort();
      const orders = (reference: string) => ds.getRepository(TestOrder).countBy({ reference });
      const scopeWarnings = (route: string) =>
        logger.warnings.filter((w) => w.includes(route) && w.includes('principal'));

      it("user B sending user A's key and body runs its own handler; each user's retry replays their own", async () => {
        const key = newKey();
        const body = { reference: `AB-${key}`, amount: 25 };
        const alice = await post('/scoped/orders', body, key, as({ id: 'alice' }));
        expect(alice.status).toBe(201);
        expect(alice.body.placedBy).toBe('alice');

        const bob = await post('/scoped/orders', body, key, as({ id: 'bob' }));
        expect(bob.status).toBe(201);
        expect(bob.headers['idempotent-replayed']).toBeUndefined();
        expect(bob.body.placedBy).toBe('bob');
        expect(bob.body.id).not.toBe(alice.body.id);
        expect(runs.count).toBe(2);
        expect(await orders(body.reference)).toBe(2);
        expect(await scopesOf(key)).toEqual(['alice', 'bob']);

        const aliceAgain = await post('/scoped/orders', body, key, as({ id: 'alice' }));
        expect(aliceAgain.headers['idempotent-replayed']).toBe('true');
        expect(aliceAgain.body).toEqual(alice.body);
        const bobAgain = await post('/scoped/orders', body, key, as({ id: 'bob' }));
        expect(bobAgain.headers['idempotent-replayed']).toBe('true');
        expect(bobAgain.body).toEqual(bob.body);
        expect(runs.count).toBe(2);
        expect(scopeWarnings('ScopedController.create')).toHaveLength(0);
      });

      it('a principal with only `sub` (JWT) scopes the key; a numeric id is stringified', async () => {
        const key = newKey();
        const body = { reference: `SUB-${key}`, amount: 3 };
        const first = await post('/scoped/orders', body, key, as({ sub: 'auth0|carol' }));
        expect(first.status).toBe(201);
        const numeric = await post('/scoped/orders', body, key, as({ id: 7, sub: 'ignored-when-id-is-set' }));
        expect(numeric.status).toBe(201);
        expect(numeric.headers['idempotent-replayed']).toBeUndefined();
        const again = await post('/scoped/orders', body, key, as({ sub: 'auth0|carol' }));
        expect(again.headers['idempotent-replayed']).toBe('true');
        expect(again.body).toEqual(first.body);
        expect(runs.count).toBe(2);
        expect(await scopesOf(key)).toEqual(['7', 'auth0|carol']);
      });

      it('no principal: the empty scope (a retry replays), with one warning per route', async () => {
        const key = newKey();
        const body = { reference: `OPEN-${key}`, amount: 1 };
        const first = await post('/open/orders', body, key);
        expect(first.status).toBe(201);
        const again = await post('/open/orders', body, key);
        expect(again.headers['idempotent-replayed']).toBe('true');
        expect(again.body).toEqual(first.body);
        expect(await scopesOf(key)).toEqual(['']);
        const otherKey = newKey();
        expect((await post('/open/other', body, otherKey)).status).toBe(201);
        expect((await post('/open/other', body, newKey())).status).toBe(201);
        expect(scopeWarnings('OpenController.create')).toHaveLength(1);
        expect(scopeWarnings('OpenController.other')).toHaveLength(1);
        expect(scopeWarnings('OpenController.create')[0]).toContain('scope');
        // A route with a principal never warns, with or without an explicit scope.
        expect(scopeWarnings('ScopedController')).toHaveLength(0);
      });

      it('an explicit `scope` wins over the principal; a route with one never warns about a principal', async () => {
        const key = newKey();
        const body = { reference: `TEN-${key}`, amount: 4 };
        const alice = await post('/scoped/tenant', body, key, { ...as({ id: 'alice' }), 'x-tenant': 'acme' });
        expect(alice.status).toBe(201);
        // Same tenant, another user: the tenant owns the key, so bob gets the tenant's stored response.
        const bob = await post('/scoped/tenant', body, key, { ...as({ id: 'bob' }), 'x-tenant': 'acme' });
        expect(bob.headers['idempotent-replayed']).toBe('true');
        expect(bob.body).toEqual(alice.body);
        expect(runs.count).toBe(1);
        expect(await scopesOf(key)).toEqual(['acme']);

        const openKey = newKey();
        expect((await post('/open/tenant', body, openKey, { 'x-tenant': 'globex' })).status).toBe(201);
        expect(await scopesOf(openKey)).toEqual(['globex']);
        expect(scopeWarnings('OpenController.tenant')).toHaveLength(0);
      });
    });
  }
}
