import { Injectable, Module } from '@nestjs/common';
import { ClientsModule, Transport } from '@nestjs/microservices';
import { ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import {
  getOutboxToken,
  OutboxConfigurationError,
  OutboxMessage,
  OutboxModule,
  OutboxModuleOptions,
  OutboxService,
} from '../src';
import { OUTBOX_OPTIONS, OUTBOX_PUBLISHER_JOB } from '../src/outbox.constants';
import type { ResolvedOutboxOptions } from '../src/outbox.options';
import { useTestDatabase } from './helpers/e2e-fixture';

/** Module wiring on SQLite: forRoot / forRootAsync variants, startup validation, scheduler registration. */
describe('OutboxModule wiring (SQLite)', () => {
  const fx = useTestDatabase('sqlite', { per: 'test' });
  // Before the database is dropped: let a DataSource of a failed boot finish connecting.
  beforeEach(() => fx.defer(() => new Promise((resolve) => setTimeout(resolve, 100))));

  const typeorm = (extra: object = {}) =>
    TypeOrmModule.forRoot({
      ...fx.db.options,
      autoLoadEntities: true,
      synchronize: true,
      retryAttempts: 0,
      ...extra,
    } as any);
  const clients = ClientsModule.register([{ name: 'BROKER', transport: Transport.TCP, options: { port: 1 } }]);

  async function boot(imports: any[]) {
    const moduleRef = await Test.createTestingModule({ imports }).compile();
    const app = moduleRef.createNestApplication();
    try {
      await app.init();
    } catch (error) {
      await app.close().catch(() => undefined);
      throw error;
    }
    return app;
  }

  it('forRoot: registers the entity (autoLoadEntities), OutboxService and the publisher job in SchedulerRegistry', async () => {
    const app = await boot([
      typeorm(),
      clients,
      ScheduleModule.forRoot(),
      OutboxModule.forRoot({ client: 'BROKER', publisher: { pollingInterval: 60_000 } }),
    ]);
    try {
      expect(app.get(DataSource).hasMetadata(OutboxMessage)).toBe(true);
      expect(app.get(OutboxService)).toBeInstanceOf(OutboxService);
      expect(app.get(SchedulerRegistry).getIntervals()).toContain(OUTBOX_PUBLISHER_JOB);
    } finally {
      await app.close();
    }
    expect(() => app.get(SchedulerRegistry).getInterval(OUTBOX_PUBLISHER_JOB)).toThrow();
  });

  it('works without ScheduleModule (its own timer) and does not import ScheduleModule behind the app’s back', async () => {
    const app = await boot([typeorm(), clients, OutboxModule.forRoot({ client: 'BROKER' })]);
    try {
      expect(() => app.get(SchedulerRegistry)).toThrow();
    } finally {
      await app.close();
    }
  });

  it('forRootAsync with useFactory and inject', async () => {
    @Injectable()
    class Config {
      batch = 42;
    }
    @Module({ providers: [Config], exports: [Config] })
    class ConfigModule {}
    const app = await boot([
      typeorm(),
      clients,
      OutboxModule.forRootAsync({
        imports: [ConfigModule],
        inject: [Config],
        useFactory: (c: Config): OutboxModuleOptions => ({ client: 'BROKER', publisher: { batchSize: c.batch } }),
      }),
    ]);
    try {
      expect(app.get<ResolvedOutboxOptions>(OUTBOX_OPTIONS).publisher.batchSize).toBe(42);
    } finally {
      await app.close();
    }
  });

  it('forRootAsync with useClass', async () => {
    @Injectable()
    class OutboxConfig {
      createOutboxOptions(): OutboxModuleOptions {
        return { client: 'BROKER', retry: { maxAttempts: 3 } };
      }
    }
    const app = await boot([typeorm(), clients, OutboxModule.forRootAsync({ useClass: OutboxConfig })]);
    try {
      expect(app.get<ResolvedOutboxOptions>(OUTBOX_OPTIONS).retry.maxAttempts).toBe(3);
    } finally {
      await app.close();
    }
  });

  it('isGlobal makes OutboxService injectable in feature modules', async () => {
    @Injectable()
    class Feature {
      constructor(readonly outbox: OutboxService) {}
    }
    @Module({ providers: [Feature] })
    class FeatureModule {}
    const app = await boot([
      typeorm(),
      clients,
      OutboxModule.forRoot({ client: 'BROKER', isGlobal: true }),
      FeatureModule,
    ]);
    try {
      expect(app.get(Feature).outbox).toBeInstanceOf(OutboxService);
    } finally {
      await app.close();
    }
  });

  it('fails at startup with OutboxConfigurationError for an invalid option', async () => {
    expect(() => OutboxModule.forRoot({ client: 'BROKER', publisher: { batchSize: 0 } })).toThrow(
      OutboxConfigurationError,
    );
    await expect(
      boot([
        typeorm(),
        clients,
        OutboxModule.forRootAsync({ useFactory: () => ({ client: 'BROKER', publisher: { enabled: 'false' as any } }) }),
      ]),
    ).rejects.toThrow(/publisher\.enabled.*boolean/);
  });

  it('fails at startup when the client token names no provider', async () => {
    await expect(boot([typeorm(), clients, OutboxModule.forRoot({ client: 'NOPE' })])).rejects.toThrow(
      /`client` names NOPE, but no provider with that token exists/,
    );
  });

  it('fails at startup when the DataSource does not know the OutboxMessage entity', async () => {
    await expect(
      boot([
        TypeOrmModule.forRoot({ ...fx.db.options, entities: [], synchronize: true, retryAttempts: 0 } as any),
        clients,
        OutboxModule.forRoot({ client: 'BROKER' }),
      ]),
    ).rejects.toThrow(/autoLoadEntities: true/);
  });

  it('uses a named DataSource when `dataSource` is given', async () => {
    const app = await boot([
      TypeOrmModule.forRoot({
        ...fx.db.options,
        name: 'events',
        autoLoadEntities: true,
        synchronize: true,
        retryAttempts: 0,
      } as any),
      clients,
      OutboxModule.forRoot({ client: 'BROKER', dataSource: 'events', publisher: { enabled: false } }),
    ]);
    try {
      // As @nestjs/typeorm's named DataSources: injected by name (@InjectOutbox('events')), never as the class.
      const outbox = app.get<OutboxService>(getOutboxToken(OutboxService, 'events'));
      expect(() => app.get(OutboxService)).toThrow();
      await outbox.transaction(() => outbox.emit('Named', { ok: true }));
      const ds = app.get<DataSource>('eventsDataSource');
      expect(await ds.getRepository(OutboxMessage).count()).toBe(1);
    } finally {
      await app.close();
    }
  });
});
