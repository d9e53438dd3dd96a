import { Controller, Get, INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { OutboxHealthIndicator, OutboxMessage, OutboxService } from '../src';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

/** The example of docs/health.md, as an app would write it. */
@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly outboxHealth: OutboxHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([
      () => this.outboxHealth.isHealthy('outbox', { maxBacklog: 2, maxLagMs: 60_000, maxDead: 0 }),
    ]);
  }

  @Get('lag')
  @HealthCheck()
  lag() {
    return this.health.check([() => this.outboxHealth.isHealthy('outbox', { maxLagMs: 1 })]);
  }
}

const kinds: DatabaseKind[] = ['sqlite', 'postgres'];

for (const kind of kinds) {
  describeWith(
    servicesOf(kind),
    `OutboxHealthIndicator in a @nestjs/terminus health check on ${DATABASE_LABEL[kind]}`,
    () => {
      const fx = useOutboxApp(kind, {
        imports: [TerminusModule.forRoot({ logger: false })],
        controllers: [HealthController],
        outbox: { publisher: { enabled: false } },
        logger: false,
      });
      let app: INestApplication;
      let outbox: OutboxService;
      let ds: DataSource;

      beforeAll(() => {
        ({ app, outbox, dataSource: ds } = fx);
      });

      beforeEach(() => ds.createQueryBuilder().delete().from(OutboxMessage).execute());

      const emit = (n: number) =>
        outbox.transaction(async () => {
          for (let i = 0; i < n; i++) await outbox.emit('HealthProbe', { i });
        });

      it('is up (200) with the counts when nothing exceeds the thresholds', async () => {
        await emit(2);
        const res = await request(app.getHttpServer()).get('/health').expect(200);
        expect(res.body.status).toBe('ok');
        expect(res.body.details.outbox).toEqual({
          status: 'up',
          pending: 2,
          due: 2,
          inFlight: 0,
          dead: 0,
          oldestPendingAgeMs: expect.any(Number),
          broker: 'prompt',
          database: 'ok',
        });
      });

      it('is down (503) when the backlog exceeds maxBacklog, naming the limit', async () => {
        await emit(3);
        const res = await request(app.getHttpServer()).get('/health').expect(503);
        expect(res.body.status).toBe('error');
        expect(res.body.error.outbox.status).toBe('down');
        expect(res.body.error.outbox.pending).toBe(3);
        expect(res.body.error.outbox.problems).toEqual(['backlog 3 > maxBacklog 2']);
      });

      it('is down (503) when a message is dead and maxDead is 0', async () => {
        const id = await outbox.transaction(() => outbox.emit('HealthProbe', {}));
        await ds.getRepository(OutboxMessage).update({ messageId: id }, { status: 'dead', lastError: 'poison' });
        const res = await request(app.getHttpServer()).get('/health').expect(503);
        expect(res.body.error.outbox).toMatchObject({
          status: 'down',
          dead: 1,
          pending: 0,
          problems: ['dead 1 > maxDead 0'],
        });
      });

      it('is down (503) when the oldest pending message is older than maxLagMs', async () => {
        await emit(1);
        await new Promise((r) => setTimeout(r, 30));
        const res = await request(app.getHttpServer()).get('/health/lag').expect(503);
        expect(res.body.error.outbox.oldestPendingAgeMs).toBeGreaterThan(1);
        expect(res.body.error.outbox.problems).toEqual([
          expect.stringMatching(/^oldest pending message is \d+ ms old > maxLagMs 1$/),
        ]);
      });

      it('is down (503) with the error when the stats query fails (outbox table missing)', async () => {
        await ds.query('ALTER TABLE outbox_messages RENAME TO outbox_messages_away');
        try {
          const res = await request(app.getHttpServer()).get('/health').expect(503);
          expect(res.body.error.outbox).toMatchObject({ status: 'down', database: 'failed' });
          expect(res.body.error.outbox.problems).toEqual([expect.stringMatching(/^stats query failed: /)]);
        } finally {
          await ds.query('ALTER TABLE outbox_messages_away RENAME TO outbox_messages');
        }
      });

      it('reports lag 0 and is up when nothing is pending', async () => {
        const res = await request(app.getHttpServer()).get('/health/lag').expect(200);
        expect(res.body.details.outbox).toMatchObject({ status: 'up', pending: 0, oldestPendingAgeMs: 0 });
      });
    },
  );
}
