import type { INestApplication } from '@nestjs/common';
import { Client, PoolClient } from 'pg';
import { DataSource } from 'typeorm';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { OutboxDatabase } from '../src/dialects/outbox-database';
import type { IdempotencyBegin, IdempotencyStoreConfig } from '../src/idempotency/idempotency-store';
import { PostgresIdempotencyStore } from '../src/idempotency/stores/postgres.idempotency-store';
import { PostgresPreparedStatements } from '../src/idempotency/stores/postgres-prepared-statements';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { TestOrder } from './fixtures/order.entity';
import { createTestDatabase, TestDatabase } from './helpers/databases';
import { describeWith } from './helpers/services';

const HOUR = 3_600_000;
const F = 'a'.repeat(64);
const G = 'b'.repeat(64);

/**
 * The PostgreSQL store's hot-path statements are server-side prepared statements, prepared once per connection.
 * When the server's statements are not what the store thinks (a transaction-pooling proxy hands the client another
 * server connection, or someone ran `DEALLOCATE ALL`), the request still succeeds: the store turns its prepared
 * statements off and goes on with the plain SQL. The pool has one connection, so every statement below meets the
 * statements the previous ones prepared.
 */
describeWith(['postgres'], 'PostgreSQL idempotency store: prepared statements', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let ds: DataSource;
  let config: IdempotencyStoreConfig;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    const moduleRef = await createOutboxTestingModule({
      db: { ...db, options: { ...db.options, extra: { max: 1 } } as TestDatabase['options'] },
      outbox: { publisher: { enabled: false } },
    });
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    ds = app.get(DataSource);
    config = { dataSource: ds, dialect: app.get(OutboxDatabase).dialect, table: 'idempotency_keys' };
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const acquired = (begun: IdempotencyBegin) => {
    if (begun.kind !== 'acquired') throw new Error(`expected the key to be acquired, got ${begun.kind}`);
    return begun.attempt;
  };
  const prepared = async () =>
    (await ds.query(`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name LIKE 'nestjs_outbox_%'`))[0].n;

  /** One request's first run: the key taken, an order inserted, the record committed. */
  const firstRun = async (store: PostgresIdempotencyStore, key: string) => {
    const attempt = acquired(await store.begin('', key, F));
    await attempt.run(() => attempt.context.manager.insert(TestOrder, { reference: key, amount: 1 }));
    const record = { fingerprint: F, status: 201, body: `{"key":"${key}"}`, headers: null, ttl: HOUR };
    expect(await attempt.commit(record)).toBe(true);
  };

  it('prepares its statements once on a connection, and uses them for the key, the replay and the 422', async () => {
    const store = new PostgresIdempotencyStore(config);
    await firstRun(store, 'p-1');
    expect(await prepared()).toBe(3); // the locks, the read, the insert
    await firstRun(store, 'p-2');
    expect(await prepared()).toBe(3);
    expect(await store.begin('', 'p-1', F)).toEqual({
      kind: 'stored',
      record: { fingerprint: F, status: 201, body: '{"key":"p-1"}', headers: null },
    });
    const other = await store.begin('', 'p-2', G);
    expect(other.kind === 'stored' && other.record.fingerprint).toBe(F); // the interceptor answers 422
    const message = acquired(await store.claim('consumer', 'm-1', F, HOUR));
    expect(await message.commit({ fingerprint: F, status: null, body: '{"n":1}', headers: null, ttl: HOUR })).toBe(
      true,
    );
    expect(await store.claim('consumer', 'm-1', F, HOUR)).toEqual({
      kind: 'stored',
      record: { fingerprint: F, status: null, body: '{"n":1}', headers: null },
    });
    expect(await prepared()).toBe(6); // and the message's claim, read and response
  });

  it('statements gone from the connection (DEALLOCATE ALL): the request succeeds with plain SQL', async () => {
    const store = new PostgresIdempotencyStore(config);
    await firstRun(store, 'd-1');
    const first = acquired(await store.claim('consumer', 'd-m0', F, HOUR));
    expect(await first.commit({ fingerprint: F, status: null, body: null, headers: null, ttl: HOUR })).toBe(true);
    expect(await prepared()).toBe(6);
    await ds.query('DEALLOCATE ALL');
    await firstRun(store, 'd-2');
    const claimed = acquired(await store.claim('consumer', 'd-m', F, HOUR));
    expect(await claimed.commit({ fingerprint: F, status: null, body: null, headers: null, ttl: HOUR })).toBe(true);
    expect(await prepared()).toBe(0); // the requests went on without preparing again
    expect(await ds.getRepository(IdempotencyRecord).countBy({ key: 'd-2' })).toBe(1);
    expect(await ds.getRepository(TestOrder).countBy({ reference: 'd-2' })).toBe(1);
    expect((await store.begin('', 'd-2', F)).kind).toBe('stored');
  });

  it('a second store of the same table uses the statements the first prepared on the connection', async () => {
    await firstRun(new PostgresIdempotencyStore(config), 'a-1');
    const before = await prepared();
    await firstRun(new PostgresIdempotencyStore(config), 'a-2');
    expect(await prepared()).toBe(before);
    expect(await ds.getRepository(TestOrder).countBy({ reference: 'a-2' })).toBe(1);
  });

  it('statements already on a connection it has not prepared (a pooling proxy shares it): plain SQL from then on', async () => {
    const statements = new PostgresPreparedStatements({ one: { params: ['int'], sql: 'SELECT $1 + 1 AS n' } });
    const name = /^EXECUTE (\w+)\(/.exec(statements.execute('one', ['1']))![1];
    const client = new Client({ ...(db.options as any), user: (db.options as any).username });
    await client.connect();
    try {
      await client.query(`PREPARE ${name}(int) AS SELECT $1 + 1 AS n`); // another client's, on the same server
      expect(await statements.prepareOn(client as unknown as PoolClient)).toBe(false);
      const fresh = new Client({ ...(db.options as any), user: (db.options as any).username });
      await fresh.connect();
      expect(await statements.prepareOn(fresh as unknown as PoolClient)).toBe(false); // off for good
      await fresh.end();
    } finally {
      await client.end();
    }
  });

  it('a migration that changes the columns under the statements (0A000): the request succeeds with plain SQL', async () => {
    const store = new PostgresIdempotencyStore(config);
    await firstRun(store, 'x-1');
    await ds.query('ALTER TABLE idempotency_keys ALTER COLUMN response_status TYPE bigint');
    await firstRun(store, 'x-2');
    expect(await store.begin('', 'x-2', F)).toEqual({
      kind: 'stored',
      record: { fingerprint: F, status: 201, body: '{"key":"x-2"}', headers: null },
    });
  });
});
