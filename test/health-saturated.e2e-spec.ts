/**
 * The health indicator tells a saturated database from an unreachable one, on PostgreSQL behind a proxy the test
 * owns: every pooled connection held → `up`, `database: 'saturated'`, the last stats read; the path cut → `down`
 * (503), `database: 'unreachable'`.
 */
import { Controller, Get, INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import request from 'supertest';
import { DataSource, QueryRunner } from 'typeorm';
import { OutboxHealthIndicator, OutboxService } from '../src';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { createTestDatabase, TestDatabase } from './helpers/databases';
import { describeWith, SERVICES } from './helpers/services';
import { TcpProxy } from './helpers/tcp-proxy';

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly outboxHealth: OutboxHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.outboxHealth.isHealthy()]);
  }
}

const POOL = 2;

describeWith(['postgres'], 'OutboxHealthIndicator: a saturated pool is not an outage (PostgreSQL)', () => {
  let db: TestDatabase;
  let proxy: TcpProxy;
  let app: INestApplication;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    proxy = await new TcpProxy(SERVICES.postgres.host, SERVICES.postgres.port).start();
    const moduleRef = await createOutboxTestingModule({
      db: {
        ...db,
        options: {
          ...db.options,
          host: '127.0.0.1',
          port: proxy.port,
          extra: { max: POOL, connectionTimeoutMillis: 300 },
        } as TestDatabase['options'],
      },
      imports: [TerminusModule.forRoot({ logger: false })],
      controllers: [HealthController],
      outbox: { publisher: { enabled: false }, cleanup: { enabled: false } },
    });
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  });

  afterAll(async () => {
    await app?.close();
    await proxy?.stop();
    await db?.drop();
  });

  it('is up with database "saturated" and the last stats while every connection is held; down and "unreachable" when cut', async () => {
    const outbox = app.get(OutboxService);
    await outbox.transaction(() => outbox.emit('HealthProbe', {}));
    const first = await request(app.getHttpServer()).get('/health').expect(200);
    expect(first.body.details.outbox).toMatchObject({ status: 'up', database: 'ok', pending: 1, broker: 'prompt' });

    const held: QueryRunner[] = [];
    try {
      for (let i = 0; i < POOL; i++) {
        const runner = app.get(DataSource).createQueryRunner();
        await runner.connect();
        await runner.startTransaction();
        held.push(runner);
      }
      const busy = await request(app.getHttpServer()).get('/health').expect(200);
      expect(busy.body.details.outbox).toMatchObject({
        status: 'up',
        database: 'saturated',
        pending: 1,
        saturation: expect.stringMatching(/timeout exceeded when trying to connect/),
      });
    } finally {
      for (const runner of held) {
        await runner.rollbackTransaction().catch(() => undefined);
        await runner.release();
      }
    }

    proxy.cut();
    try {
      const down = await request(app.getHttpServer()).get('/health').expect(503);
      expect(down.body.error.outbox).toMatchObject({ status: 'down', database: 'unreachable' });
      expect(down.body.error.outbox.problems).toEqual([expect.stringMatching(/^stats query failed: /)]);
    } finally {
      proxy.restore();
    }
    const back = await request(app.getHttpServer()).get('/health').expect(200);
    expect(back.body.details.outbox).toMatchObject({ status: 'up', database: 'ok' });
  });
});
