import type { INestApplication } from '@nestjs/common';
import { ClientsModule, Transport } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { OutboxConfigurationError, OutboxMessage, OutboxModule, OutboxModuleOptions, OutboxService } from '../src';
import { OutboxSchemaError } from '../src/errors';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { IdempotencyStep } from '../src/schema/idempotency-step.entity';
import { CreateOutboxTables1764374400000 } from '../src/schema/migrations/1764374400000-outbox-tables';
import { CreateIdempotencyKeys1764460800000 } from '../src/schema/migrations/1764460800000-idempotency-keys';
import { AddOutboxAttempts1765152000000 } from '../src/schema/migrations/1765152000000-outbox-attempts';
import { CreateIdempotencySteps1765411200000 } from '../src/schema/migrations/1765411200000-idempotency-steps';
import { AddOutboxDestinations1765497600000 } from '../src/schema/migrations/1765497600000-outbox-destinations';
import { AddOutboxExpiry1765670400000 } from '../src/schema/migrations/1765670400000-outbox-expiry';
import { AddOutboxCause1765756800000 } from '../src/schema/migrations/1765756800000-outbox-cause';
import { AddOutboxEditAudit1765843200000 } from '../src/schema/migrations/1765843200000-outbox-edit-audit';
import { OutboxAttempt } from '../src/schema/outbox-attempt.entity';
import { OutboxKeyLock } from '../src/schema/outbox-key-lock.entity';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { describeWith } from './helpers/services';

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];
const MIGRATIONS = [
  CreateOutboxTables1764374400000,
  AddOutboxAttempts1765152000000,
  AddOutboxDestinations1765497600000,
  CreateIdempotencyKeys1764460800000,
  CreateIdempotencySteps1765411200000,
  AddOutboxExpiry1765670400000,
  AddOutboxCause1765756800000,
  AddOutboxEditAudit1765843200000,
];
const TYPEORM_DEFAULTS = { autoLoadEntities: true, synchronize: false, retryAttempts: 0, logging: false };

/** Startup schema check: a missing table or column fails app.init() with OutboxSchemaError, not the first request. */
for (const kind of kinds) {
  describeWith(servicesOf(kind), `Startup schema check on ${DATABASE_LABEL[kind]}`, () => {
    let db: TestDatabase;
    const label = DATABASE_LABEL[kind];

    beforeEach(async () => {
      db = await createTestDatabase(kind);
    });
    afterEach(async () => {
      await db?.drop();
    });

    /** Prepares the database with a DataSource of its own, as a migration job or another app would. */
    async function withDataSource(work: (ds: DataSource) => Promise<unknown>, migrations: unknown[] = MIGRATIONS) {
      const entities = [OutboxMessage, OutboxKeyLock, OutboxAttempt, IdempotencyRecord, IdempotencyStep];
      const ds = new DataSource({ ...db.options, entities, migrations, logging: false } as never);
      await ds.initialize();
      try {
        await work(ds);
      } finally {
        await ds.destroy();
      }
    }

    async function boot(typeorm: object = {}, outbox: Partial<OutboxModuleOptions> = {}, name?: string) {
      const options = { client: 'BROKER', dataSource: name, publisher: { pollingInterval: 60_000 }, ...outbox };
      const moduleRef = await Test.createTestingModule({
        imports: [
          TypeOrmModule.forRoot({ ...db.options, name, ...TYPEORM_DEFAULTS, ...typeorm } as any),
          ClientsModule.register([{ name: 'BROKER', transport: Transport.TCP, options: { port: 1 } }]),
          OutboxModule.forRoot(options),
        ],
      }).compile();
      const app = moduleRef.createNestApplication({ logger: false });
      try {
        await app.init();
      } catch (error) {
        await app.close().catch(() => undefined);
        throw error;
      }
      return app;
    }

    async function bootError(typeorm: object = {}, name?: string): Promise<OutboxSchemaError> {
      const error = await boot(typeorm, {}, name).then(
        async (app) => {
          await app.close();
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(OutboxSchemaError);
      // Caught without the class: a configuration error of its own code.
      expect(error).toBeInstanceOf(OutboxConfigurationError);
      expect((error as OutboxSchemaError).code).toBe('OUTBOX_SCHEMA');
      return error as OutboxSchemaError;
    }

    /** Emits one keyed event and reads it back: the tables the check passed are usable. */
    async function emitsOne(app: INestApplication, name?: string) {
      const outbox = app.get(OutboxService);
      const id = await outbox.transaction(() => outbox.emit('SchemaChecked', { ok: true }, { key: 'k-1' }));
      const ds = app.get<DataSource>(getDataSourceToken(name));
      expect((await ds.getRepository(OutboxMessage).findOneByOrFail({ messageId: id })).pattern).toBe('SchemaChecked');
    }

    it(`${label}: no tables → app.init() fails with OutboxSchemaError naming tables, DataSource, fixes`, async () => {
      const error = await bootError();
      const expected = [
        'outbox_messages',
        ...(kind === 'mariadb' ? ['outbox_key_locks'] : []),
        'outbox_attempts',
        'idempotency_keys',
        'idempotency_steps',
      ];
      expect(error.problems.map((p) => p.table)).toEqual(expected);
      expect(error.problems.every((p) => p.tableMissing)).toBe(true);
      expect(error.dataSource).toBe('default');
      for (const table of expected) expect(error.message).toContain(`table "${table}" does not exist`);
      expect(error.message).toContain("DataSource 'default'");
      expect(error.message).toContain(
        'CreateOutboxTables1764374400000, AddOutboxAttempts1765152000000, AddOutboxDestinations1765497600000, ' +
          'AddOutboxExpiry1765670400000, AddOutboxCause1765756800000, AddOutboxEditAudit1765843200000, ' +
          'CreateIdempotencyKeys1764460800000 and ' +
          'CreateIdempotencySteps1765411200000',
      );
      expect(error.message).toContain('`synchronize: true` in development');
      expect(error.message).toContain('`schemaCheck: false`');
    });

    it(`${label}: only the first outbox migration run → fails naming the later columns, outbox_attempts and only the later migrations`, async () => {
      await withDataSource(
        (ds) => ds.runMigrations(),
        [CreateOutboxTables1764374400000, CreateIdempotencyKeys1764460800000, CreateIdempotencySteps1765411200000],
      );
      const error = await bootError();
      expect(error.problems).toEqual([
        {
          table: 'outbox_messages',
          tableMissing: false,
          missingColumns: ['destination', 'expires_at', 'dead_at', 'cause_scope', 'cause_key', 'edit_audit'],
        },
        {
          table: 'outbox_attempts',
          tableMissing: true,
          missingColumns: expect.arrayContaining(['message_seq', 'error']),
        },
      ]);
      expect(error.message).toContain(
        'run the shipped migrations AddOutboxAttempts1765152000000, AddOutboxDestinations1765497600000, ' +
          'AddOutboxExpiry1765670400000, AddOutboxCause1765756800000 and AddOutboxEditAudit1765843200000 (exported',
      );
      expect(error.message).not.toContain('was not made by these migrations');
      expect(error.message).not.toContain('CreateOutboxTables1764374400000');
    });

    it(`${label}: only the outbox migrations run → fails naming idempotency_keys and its migration`, async () => {
      await withDataSource(
        (ds) => ds.runMigrations(),
        [
          CreateOutboxTables1764374400000,
          AddOutboxAttempts1765152000000,
          AddOutboxDestinations1765497600000,
          CreateIdempotencySteps1765411200000,
          AddOutboxExpiry1765670400000,
          AddOutboxCause1765756800000,
          AddOutboxEditAudit1765843200000,
        ],
      );
      const error = await bootError();
      const missingColumns = expect.arrayContaining(['idempotency_key', 'fingerprint']);
      expect(error.problems).toEqual([{ table: 'idempotency_keys', tableMissing: true, missingColumns }]);
      expect(error.message).toContain('CreateIdempotencyKeys1764460800000');
      expect(error.message).not.toContain('CreateOutboxTables1764374400000');
    });

    it(`${label}: an app upgraded without the steps migration → fails naming idempotency_steps and only its migration`, async () => {
      await withDataSource(
        (ds) => ds.runMigrations(),
        MIGRATIONS.filter((m) => m !== CreateIdempotencySteps1765411200000),
      );
      const error = await bootError();
      const missingColumns = expect.arrayContaining(['idempotency_key', 'step', 'result']);
      expect(error.problems).toEqual([{ table: 'idempotency_steps', tableMissing: true, missingColumns }]);
      expect(error.message).toContain('run the shipped migration CreateIdempotencySteps1765411200000 (exported');
      expect(error.message).not.toContain('CreateIdempotencyKeys1764460800000');
    });

    it(`${label}: an app upgraded without the destinations migration → fails naming destination and only its migration`, async () => {
      await withDataSource(
        (ds) => ds.runMigrations(),
        MIGRATIONS.filter((m) => m !== AddOutboxDestinations1765497600000),
      );
      const error = await bootError();
      expect(error.problems).toEqual([
        { table: 'outbox_messages', tableMissing: false, missingColumns: ['destination'] },
      ]);
      expect(error.message).toContain('run the shipped migration AddOutboxDestinations1765497600000 (exported');
      expect(error.message).not.toContain('was not made by these migrations');
    });

    it(`${label}: an app upgraded without the expiry migration → fails naming expires_at and only its migration`, async () => {
      await withDataSource(
        (ds) => ds.runMigrations(),
        MIGRATIONS.filter((m) => m !== AddOutboxExpiry1765670400000),
      );
      const error = await bootError();
      expect(error.problems).toEqual([
        { table: 'outbox_messages', tableMissing: false, missingColumns: ['expires_at'] },
      ]);
      expect(error.message).toContain('run the shipped migration AddOutboxExpiry1765670400000 (exported');
      expect(error.message).not.toContain('was not made by these migrations');
    });

    it(`${label}: an app upgraded without the cause migration → fails naming cause_scope, cause_key and only its migration`, async () => {
      await withDataSource(
        (ds) => ds.runMigrations(),
        MIGRATIONS.filter((m) => m !== AddOutboxCause1765756800000),
      );
      const error = await bootError();
      expect(error.problems).toEqual([
        { table: 'outbox_messages', tableMissing: false, missingColumns: ['cause_scope', 'cause_key'] },
      ]);
      expect(error.message).toContain('run the shipped migration AddOutboxCause1765756800000 (exported');
      expect(error.message).not.toContain('was not made by these migrations');
    });

    it(`${label}: an app upgraded without the edit-audit migration → fails naming edit_audit and only its migration`, async () => {
      await withDataSource(
        (ds) => ds.runMigrations(),
        MIGRATIONS.filter((m) => m !== AddOutboxEditAudit1765843200000),
      );
      const error = await bootError();
      expect(error.problems).toEqual([
        { table: 'outbox_messages', tableMissing: false, missingColumns: ['edit_audit'] },
      ]);
      expect(error.message).toContain('run the shipped migration AddOutboxEditAudit1765843200000 (exported');
      expect(error.message).not.toContain('was not made by these migrations');
    });

    it(`${label}: a dropped column → fails naming the table, the column, the named DataSource`, async () => {
      await withDataSource(async (ds) => {
        await ds.runMigrations();
        const q = kind === 'mariadb' ? '`' : '"';
        await ds.query(`ALTER TABLE ${q}outbox_messages${q} DROP COLUMN ${q}claimed_by${q}`);
        await ds.query(`ALTER TABLE ${q}idempotency_keys${q} DROP COLUMN ${q}response_headers${q}`);
      });
      const error = await bootError({}, 'events');
      expect(error.problems).toEqual([
        { table: 'outbox_messages', tableMissing: false, missingColumns: ['claimed_by'] },
        { table: 'idempotency_keys', tableMissing: false, missingColumns: ['response_headers'] },
      ]);
      expect(error.dataSource).toBe('events');
      expect(error.message).toContain("DataSource 'events'");
      expect(error.message).toContain('table "outbox_messages" lacks the column claimed_by');
      expect(error.message).toContain('table "idempotency_keys" lacks the column response_headers');
    });

    it(`${label}: boots with the shipped migrations run by TypeORM (migrationsRun)`, async () => {
      const app = await boot({ migrations: MIGRATIONS, migrationsRun: true });
      try {
        await emitsOne(app);
      } finally {
        await app.close();
      }
    });

    it(`${label}: boots with synchronize: true (tables made while the DataSource initializes)`, async () => {
      const app = await boot({ synchronize: true });
      try {
        await emitsOne(app);
      } finally {
        await app.close();
      }
    });

    it(`${label}: schemaCheck: false boots without tables (publisher on); later migrations work`, async () => {
      const app = await boot({ migrations: MIGRATIONS }, { schemaCheck: false });
      try {
        await app.get(DataSource).runMigrations();
        await emitsOne(app);
      } finally {
        await app.close();
      }
    });
  });
}
