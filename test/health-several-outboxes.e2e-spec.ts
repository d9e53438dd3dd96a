import { Controller, Get, INestApplication, Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import { getDataSourceToken } from '@nestjs/typeorm';
import request from 'supertest';
import type { DataSource } from 'typeorm';
import {
  getOutboxToken,
  InjectOutbox,
  OutboxConfigurationError,
  OutboxHealthIndicator,
  OutboxMessage,
  OutboxModule,
  OutboxService,
} from '../src';
import { twoDataSources } from './fixtures/two-data-sources';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from './helpers/databases';

/** A health endpoint for every outbox of the app, and one for the billing outbox alone, as an app would write them. */
@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly outboxHealth: OutboxHealthIndicator,
    @InjectOutbox('billing', OutboxHealthIndicator) private readonly billingHealth: OutboxHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([
      () => this.outboxHealth.isEveryOutboxHealthy({ maxDead: 0 }, { billing: { maxBacklog: 1 } }),
    ]);
  }

  @Get('billing')
  @HealthCheck()
  billing() {
    return this.health.check([() => this.billingHealth.isHealthy()]);
  }
}

describe(`OutboxHealthIndicator of two outboxes on ${DATABASE_LABEL.sqlite}, one file per DataSource`, () => {
  let ordersDb: TestDatabase;
  let billingDb: TestDatabase;
  let app: INestApplication;
  let billingSource: DataSource;
  const health = () => request(app.getHttpServer()).get('/health');
  const emit = async (outbox: OutboxService, n: number) =>
    outbox.transaction(async () => {
      for (let i = 0; i < n; i++) await outbox.emit('HealthProbe', { i });
    });

  beforeAll(async () => {
    [ordersDb, billingDb] = await Promise.all([createTestDatabase('sqlite'), createTestDatabase('sqlite')]);
    const options = { publisher: { enabled: false } };
    @Module({
      imports: [
        ...twoDataSources(ordersDb, billingDb),
        ScheduleModule.forRoot(),
        TerminusModule.forRoot({ logger: false }),
        OutboxModule.forRoot({ client: undefined, ...options }),
        OutboxModule.forRoot({ dataSource: 'billing', client: undefined, ...options }),
      ],
      controllers: [HealthController],
    })
    class TwoOutboxHealthModule {}
    const moduleRef = await Test.createTestingModule({ imports: [TwoOutboxHealthModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    billingSource = app.get<DataSource>(getDataSourceToken('billing'));
  });

  afterAll(async () => {
    await app?.close();
    await Promise.all([ordersDb?.drop(), billingDb?.drop()]);
  });

  beforeEach(async () => {
    for (const source of [app.get<DataSource>(getDataSourceToken()), billingSource]) {
      await source.createQueryBuilder().delete().from(OutboxMessage).execute();
    }
  });

  it('reports each outbox under its own key, up when each is within its thresholds', async () => {
    await emit(app.get(OutboxService), 3);
    const res = await health().expect(200);
    expect(Object.keys(res.body.details)).toEqual(['outbox', 'outbox-billing']);
    expect(res.body.details.outbox).toMatchObject({ status: 'up', pending: 3 });
    expect(res.body.details['outbox-billing']).toMatchObject({ status: 'up', pending: 0 });
  });

  it('is down (503) when one outbox exceeds its own threshold; the other is reported up beside it', async () => {
    await emit(app.get<OutboxService>(getOutboxToken(OutboxService, 'billing')), 2);
    await emit(app.get(OutboxService), 2); // within the default outbox's maxBacklog (10 000)
    const res = await health().expect(503);
    expect(res.body.error).toEqual({
      'outbox-billing': expect.objectContaining({ status: 'down', pending: 2, problems: ['backlog 2 > maxBacklog 1'] }),
    });
    expect(res.body.info.outbox).toMatchObject({ status: 'up', pending: 2 });
  });

  it('is down for the outbox whose stats query fails, and only for it', async () => {
    await billingSource.query('ALTER TABLE outbox_messages RENAME TO outbox_messages_away');
    try {
      const res = await health().expect(503);
      expect(res.body.error['outbox-billing'].problems).toEqual([expect.stringMatching(/^stats query failed: /)]);
      expect(res.body.info.outbox.status).toBe('up');
    } finally {
      await billingSource.query('ALTER TABLE outbox_messages_away RENAME TO outbox_messages');
    }
  });

  it("a named outbox's own indicator reports under outbox-<name> unless given a key", async () => {
    await emit(app.get<OutboxService>(getOutboxToken(OutboxService, 'billing')), 1);
    const res = await request(app.getHttpServer()).get('/health/billing').expect(200);
    expect(res.body.details).toEqual({ 'outbox-billing': expect.objectContaining({ status: 'up', pending: 1 }) });
    const billing = app.get<OutboxHealthIndicator>(getOutboxToken(OutboxHealthIndicator, 'billing'));
    expect(Object.keys(await billing.isHealthy('payments', {}))).toEqual(['payments']);
    expect(Object.keys(await app.get(OutboxHealthIndicator).isHealthy())).toEqual(['outbox']);
  });

  it('refuses thresholds for an outbox the app does not have, naming those it has', async () => {
    const indicator = app.get(OutboxHealthIndicator);
    await expect(indicator.isEveryOutboxHealthy({}, { payroll: { maxDead: 0 } })).rejects.toThrow(
      OutboxConfigurationError,
    );
    await expect(indicator.isEveryOutboxHealthy({}, { payroll: {} })).rejects.toThrow(
      /'payroll', which this app has no outbox of\. Its outboxes: default, billing/,
    );
  });
});
