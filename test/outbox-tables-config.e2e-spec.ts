import { ClientsModule, Transport } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { getOutboxToken, OutboxConfigurationError, outboxEntities, OutboxModule, OutboxService } from '../src';
import { DATABASE_LABEL, type DatabaseKind, servicesOf } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

const clients = ClientsModule.register([{ name: 'BROKER', transport: Transport.TCP, options: { port: 1 } }]);
const quiet = { client: 'BROKER', publisher: { enabled: false } } as const;
let apps = 0;

/** The `tables` option at startup: the entities it needs, its checks, and where its rows go. */
for (const kind of ['sqlite', 'postgres', 'mariadb'] as DatabaseKind[]) {
  describeWith(servicesOf(kind), `OutboxModule tables option on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useTestDatabase(kind, { per: 'test' });
    // Before the database is dropped: let a DataSource of a failed boot finish connecting.
    beforeEach(() => fx.defer(() => new Promise((resolve) => setTimeout(resolve, 100))));

    // Each app its own DataSource name: the entities registered for autoLoadEntities are kept per name, process-wide.
    let name = '';
    beforeEach(() => (name = `tables${++apps}`));
    // A DataSource is opened before the outbox's providers fail: close it then (an open pool keeps jest running).
    const opened: DataSource[] = [];
    afterEach(async () => {
      for (const ds of opened.splice(0)) if (ds.isInitialized) await ds.destroy();
    });
    const typeorm = (extra: object) =>
      TypeOrmModule.forRootAsync({
        name,
        useFactory: () => ({ ...fx.db.options, name, synchronize: true, retryAttempts: 0, ...extra }) as never,
        dataSourceFactory: async (options) => {
          const ds = new DataSource(options as DataSourceOptions);
          opened.push(ds);
          return ds.initialize();
        },
      });

    async function boot(imports: unknown[]) {
      const moduleRef = await Test.createTestingModule({ imports: imports as never[] }).compile();
      const app = moduleRef.createNestApplication();
      app.useLogger(false);
      try {
        await app.init();
      } catch (error) {
        await app.close().catch(() => undefined);
        throw error;
      }
      fx.defer(() => app.close());
      return app;
    }

    it('fails at startup, naming the outboxEntities() call, when the DataSource lacks the configured entities', async () => {
      const failure = boot([
        typeorm({ entities: [...outboxEntities()] }),
        clients,
        OutboxModule.forRoot({ ...quiet, dataSource: name, tables: { prefix: 'billing_' } }),
      ]);
      await expect(failure).rejects.toThrow(OutboxConfigurationError);
      await expect(failure).rejects.toThrow(
        /no entity for the table billing_outbox_messages .*Add `\.\.\.outboxEntities\(\{ prefix: 'billing_' \}\)` to the `entities`.*Its entities have the outbox table outbox_messages: give OutboxModule\.forRoot\(\) the same `tables` option/,
      );
    });

    it('registers and uses only the configured tables with autoLoadEntities (forRootAsync)', async () => {
      const app = await boot([
        typeorm({ autoLoadEntities: true }),
        clients,
        OutboxModule.forRootAsync({ dataSource: name, tables: { prefix: 'app_' }, useFactory: () => quiet }),
      ]);
      const outbox = app.get<OutboxService>(getOutboxToken(OutboxService, name));
      const id = await outbox.transaction(() => outbox.emit('Prefixed', { ok: true }));
      const ds = app.get<DataSource>(getDataSourceToken(name));
      const runner = ds.createQueryRunner();
      try {
        expect(await runner.hasTable('app_outbox_messages')).toBe(true);
        expect(await runner.hasTable('app_idempotency_steps')).toBe(true);
        expect(await runner.hasTable('outbox_messages')).toBe(false);
      } finally {
        await runner.release();
      }
      const q = (n: string) => ds.driver.escape(n);
      expect(await ds.query(`SELECT ${q('message_id')} AS id FROM ${q('app_outbox_messages')}`)).toEqual([{ id }]);
    });

    if (kind === 'postgres') {
      it('fails at startup when a name derived from the prefix is longer than PostgreSQL allows', async () => {
        const prefix = 'p'.repeat(29);
        await expect(
          boot([typeorm({}), clients, OutboxModule.forRoot({ ...quiet, dataSource: name, tables: { prefix } })]),
        ).rejects.toThrow(/longer than postgres allows \(63 bytes\).*Shorten the prefix/);
      });
    } else {
      it('fails at startup when tables.schema is set outside PostgreSQL', async () => {
        await expect(
          boot([
            typeorm({}),
            clients,
            OutboxModule.forRoot({ ...quiet, dataSource: name, tables: { schema: 'billing' } }),
          ]),
        ).rejects.toThrow(/tables\.schema \('billing'\) is supported on PostgreSQL only/);
      });
    }

    it('rejects a bad prefix where the module is imported', () => {
      expect(() => OutboxModule.forRoot({ ...quiet, tables: { prefix: 'billing-' } })).toThrow(
        OutboxConfigurationError,
      );
      expect(() => OutboxModule.forRootAsync({ tables: { prefix: 'x y' }, useFactory: () => quiet })).toThrow(
        /tables\.prefix must be letters, digits and _/,
      );
    });
  });
}
