import { Body, Controller, INestApplication, Post } from '@nestjs/common';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { Idempotent, OutboxService } from '../src';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { listenHttpApp } from './fixtures/http-app';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { TestOrder } from './fixtures/order.entity';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith, SERVICES } from './helpers/services';
import { TcpProxy } from './helpers/tcp-proxy';

/** Lets a test hold a handler between its first write and its second. */
const held = { entered: 0, release: () => undefined as void, gate: Promise.resolve() };

@Controller('orders')
class OrdersController {
  constructor(private readonly outbox: OutboxService) {}

  @Post()
  @Idempotent()
  async create(@Body() body: { reference: string }) {
    const order = await this.outbox.manager.save(TestOrder, { reference: body.reference, amount: 1 });
    return { id: order.id };
  }

  /** Writes, waits for the test, then writes again: the connection can be cut in between. */
  @Post('held')
  @Idempotent()
  async createHeld(@Body() body: { reference: string }) {
    await this.outbox.manager.save(TestOrder, { reference: body.reference, amount: 1 });
    held.entered++;
    await held.gate;
    await this.outbox.emit('OrderPlaced', { reference: body.reference });
    return { reference: body.reference };
  }
}

const kinds: DatabaseKind[] = ['postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(
    servicesOf(kind),
    `@Idempotent() while ${DATABASE_LABEL[kind]} is unreachable (path cut by a TCP proxy)`,
    () => {
      let db: TestDatabase;
      let proxy: TcpProxy;
      let app: INestApplication;
      let ds: DataSource;
      let url: string;
      const unique = `${Date.now().toString(36)}`;

      beforeAll(async () => {
        const real = await createTestDatabase(kind);
        const service = SERVICES[kind === 'postgres' ? 'postgres' : 'mariadb'];
        proxy = await new TcpProxy(service.host, service.port).start();
        db = { ...real, options: { ...real.options, port: proxy.port } as any };
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [OrdersController],
          outbox: { publisher: { enabled: false }, cleanup: { enabled: false } },
        });
        ({ app, url } = await listenHttpApp(moduleRef));
        ds = app.get(DataSource);
      });

      afterAll(async () => {
        proxy?.restore();
        await app?.close();
        await proxy?.stop();
        await db?.drop();
      });

      const post = (path: string, key: string) =>
        request(url)
          .post(path)
          .set('Idempotency-Key', key)
          .send({ reference: `${unique}-${key}` });
      const expect503 = (r: request.Response) => {
        expect(r.status).toBe(503);
        expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(r.headers['retry-after']).toBe('1');
        expect(JSON.parse(r.text)).toMatchObject({
          status: 503,
          title: 'Service Unavailable',
          code: 'database-unavailable',
        });
      };
      /** The first 201 after the path is restored (the pool replaces its dead connections). */
      const recovered = async (path: string, key: string) => {
        let last: request.Response | undefined;
        await waitFor(async () => (last = await post(path, key)).status !== 503, `a non-503 answer for ${key}`, 20_000);
        return last!;
      };

      it('answers 503 problem+json with Retry-After when the key cannot be taken; the same key succeeds once the database is back', async () => {
        expect((await post('/orders', 'before')).status).toBe(201);
        proxy.cut();
        try {
          expect503(await post('/orders', 'down'));
          expect503(await post('/orders', 'down'));
        } finally {
          proxy.restore();
        }
        const retried = await recovered('/orders', 'down');
        expect(retried.status).toBe(201);
        expect(retried.headers['idempotent-replayed']).toBeUndefined();
        expect(await ds.getRepository(TestOrder).countBy({ reference: `${unique}-down` })).toBe(1);
      });

      it('answers 503 when the connection is lost inside the handler; nothing was applied, so the retry runs it once', async () => {
        let release!: () => void;
        held.gate = new Promise<void>((resolve) => (release = resolve));
        held.entered = 0;
        const pending = post('/orders/held', 'mid');
        const answer = pending.then((r) => r);
        await waitFor(async () => held.entered === 1, 'the handler to write once', 10_000);
        proxy.cut();
        release();
        try {
          expect503(await answer);
        } finally {
          proxy.restore();
        }
        held.gate = Promise.resolve();
        const retried = await recovered('/orders/held', 'mid');
        expect(retried.status).toBe(201);
        expect(retried.headers['idempotent-replayed']).toBeUndefined();
        expect(await ds.getRepository(TestOrder).countBy({ reference: `${unique}-mid` })).toBe(1);
        expect(await ds.getRepository(IdempotencyRecord).countBy({ key: 'mid' })).toBe(1);
        const replay = await post('/orders/held', 'mid');
        expect(replay.status).toBe(201);
        expect(replay.headers['idempotent-replayed']).toBe('true');
      });
    },
  );
}
