import { DataSource } from 'typeorm';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { beginAttempt, IDEMPOTENCY_CLEANUP_TASK, IdempotencyService } from '../src/idempotency/idempotency.service';
import { OutboxCleanupRegistry } from '../src/scheduling/outbox-cleanup.registry';
import { CreateIdempotencyKeys1764460800000 } from '../src/schema/migrations/1764460800000-idempotency-keys';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';
import { OutboxDatabase } from '../src/dialects/outbox-database';
import { waitFor } from './helpers/ports';

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];
const HOUR = 3_600_000;

for (const kind of kinds) {
  describeWith(
    servicesOf(kind),
    `Idempotency records: expiry, cleanup and migration on ${DATABASE_LABEL[kind]}`,
    () => {
      const fx = useOutboxApp(kind, {
        logger: false,
        outbox: { publisher: { enabled: false }, idempotency: { ttl: HOUR } },
      });
      let ds: DataSource;
      let idempotency: IdempotencyService;

      beforeAll(() => {
        ds = fx.dataSource;
        idempotency = fx.app.get(IdempotencyService);
      });

      beforeEach(() => ds.getRepository(IdempotencyRecord).clear());

      /** Takes a key the way the service does, without its in-process table of running keys (the database decides). */
      const begin = (scope: string, key: string, fingerprint: string) =>
        beginAttempt(
          idempotency.store,
          { dataSource: ds, dialect: fx.app.get(OutboxDatabase).dialect, table: 'idempotency_keys' },
          scope,
          key,
          fingerprint,
        );

      const record = (key: string, expiresInMs: number, fingerprint = 'f'.repeat(64)) =>
        ds.getRepository(IdempotencyRecord).insert({
          scope: 's',
          key,
          fingerprint,
          responseStatus: 201,
          responseBody: JSON.stringify({ key }),
          responseHeaders: null,
          createdAt: new Date(Date.now() - HOUR),
          expiresAt: new Date(Date.now() + expiresInMs),
        });

      it('replays a live record, and treats an expired one as absent: the next request runs and replaces it', async () => {
        await record('live', HOUR);
        await record('old', -60_000);
        const live = await begin('s', 'live', 'f'.repeat(64));
        expect(live).toEqual({
          kind: 'stored',
          record: {
            fingerprint: 'f'.repeat(64),
            status: 201,
            body: '{"key":"old"}'.replace('old', 'live'),
            headers: null,
          },
        });

        const old = await begin('s', 'old', 'a'.repeat(64));
        expect(old.kind).toBe('acquired');
        if (old.kind !== 'acquired') return;
        expect(
          await old.attempt.commit({
            fingerprint: 'a'.repeat(64),
            status: 200,
            body: '"new"',
            headers: null,
            ttl: HOUR,
          }),
        ).toBe(true);
        const rows = await ds.getRepository(IdempotencyRecord).findBy({ key: 'old' });
        expect(rows).toHaveLength(1);
        expect(rows[0].responseBody).toBe('"new"');
        expect(rows[0].expiresAt.getTime()).toBeGreaterThan(Date.now());
      });

      it('a rolled-back attempt leaves no record and frees the key at once', async () => {
        const first = await begin('s', 'k', 'b'.repeat(64));
        expect(first.kind).toBe('acquired');
        if (first.kind === 'acquired') await first.attempt.rollback();
        expect(await ds.getRepository(IdempotencyRecord).countBy({ key: 'k' })).toBe(0);
        const again = await begin('s', 'k', 'b'.repeat(64));
        expect(again.kind).toBe('acquired');
        if (again.kind === 'acquired')
          expect(
            await again.attempt.commit({
              fingerprint: 'b'.repeat(64),
              status: null,
              body: null,
              headers: null,
              ttl: HOUR,
            }),
          ).toBe(true);
        expect(await ds.getRepository(IdempotencyRecord).countBy({ key: 'k' })).toBe(1);
      });

      if (kind !== 'sqlite') {
        it('a connection that dies mid-request (a crashed process) leaves no record and frees the key as its session ends', async () => {
          const begun = await begin('s', 'crash', 'd'.repeat(64));
          if (begun.kind !== 'acquired') throw new Error(`expected to acquire, got ${begun.kind}`);
          const manager = begun.attempt.context.manager;
          await manager.query(
            kind === 'postgres'
              ? 'INSERT INTO "idempotency_keys" ("scope", "idempotency_key", "fingerprint", "created_at", "expires_at") VALUES ($1, $2, $3, 0, 0)'
              : 'INSERT INTO `idempotency_keys` (`scope`, `idempotency_key`, `fingerprint`, `created_at`, `expires_at`) VALUES (?, ?, ?, 0, 0)',
            ['s', 'crash-effect', 'x'],
          );
          const [{ id }] = await manager.query(
            kind === 'postgres' ? 'SELECT pg_backend_pid() AS id' : 'SELECT CONNECTION_ID() AS id',
          );
          await ds.query(
            kind === 'postgres' ? 'SELECT pg_terminate_backend($1)' : `KILL ${Number(id)}`,
            kind === 'postgres' ? [id] : [],
          );
          await begun.attempt.rollback().catch(() => undefined); // the connection is gone: nothing to roll back from here
          // pg_terminate_backend only signals the backend, and MariaDB's KILL returns before the killed thread has
          // ended: the key's locks go when the session has ended, so wait for that (not for a fixed time).
          const alive =
            kind === 'postgres'
              ? 'SELECT count(*) AS n FROM pg_stat_activity WHERE pid = $1'
              : 'SELECT count(*) AS n FROM information_schema.PROCESSLIST WHERE ID = ?';
          await waitFor(async () => Number((await ds.query(alive, [id]))[0].n) === 0, 'the killed session to end');
          const again = await begin('s', 'crash', 'd'.repeat(64));
          expect(again.kind).toBe('acquired');
          if (again.kind === 'acquired') await again.attempt.rollback();
          expect(await ds.getRepository(IdempotencyRecord).countBy({ scope: 's' })).toBe(0);
        });
      }

      it('deletes expired records in batches through the cleanup task, never live ones', async () => {
        for (let i = 0; i < 5; i++) await record(`expired-${i}`, -1000 - i);
        await record('live', HOUR);
        const task = fx.app
          .get(OutboxCleanupRegistry)
          .all()
          .find((t) => t.name === IDEMPOTENCY_CLEANUP_TASK);
        expect(task).toBeDefined();
        expect(await task!.deleteBatch(3)).toBe(3);
        expect(await task!.deleteBatch(3)).toBe(2);
        expect(await task!.deleteBatch(3)).toBe(0);
        expect((await ds.getRepository(IdempotencyRecord).find()).map((r) => r.key)).toEqual(['live']);
      });

      it('uses the module-wide ttl', async () => {
        const begun = await begin('s', 'ttl', 'c'.repeat(64));
        if (begun.kind !== 'acquired') throw new Error(`expected to acquire, got ${begun.kind}`);
        await begun.attempt.commit({
          fingerprint: 'c'.repeat(64),
          status: 200,
          body: null,
          headers: null,
          ttl: idempotency.defaults.ttl,
        });
        const row = await ds.getRepository(IdempotencyRecord).findOneByOrFail({ key: 'ttl' });
        expect(row.expiresAt.getTime() - row.createdAt.getTime()).toBe(HOUR);
      });

      it('the migration creates the table the entity describes (unique (scope, key), expiry index)', async () => {
        const migrated = await createTestDatabase(kind);
        const source = new DataSource({
          ...migrated.options,
          entities: [IdempotencyRecord],
          migrations: [CreateIdempotencyKeys1764460800000],
          logging: false,
        } as any);
        try {
          await source.initialize();
          await source.runMigrations();
          const pending = (await source.driver.createSchemaBuilder().log()).upQueries.map((q) => q.query);
          // MySQL/MariaDB: the migration's MEDIUMTEXT body is wider than the entity's TEXT on purpose.
          const unexpected = pending.filter((q) => !(kind === 'mariadb' && /response_body/.test(q)));
          expect(unexpected).toEqual([]);
          await source.getRepository(IdempotencyRecord).insert({
            scope: 's',
            key: 'k',
            fingerprint: 'f',
            responseStatus: null,
            responseBody: null,
            responseHeaders: null,
            createdAt: new Date(),
            expiresAt: new Date(),
          });
          await expect(
            source.getRepository(IdempotencyRecord).insert({
              scope: 's',
              key: 'k',
              fingerprint: 'g',
              responseStatus: null,
              responseBody: null,
              responseHeaders: null,
              createdAt: new Date(),
              expiresAt: new Date(),
            }),
          ).rejects.toThrow();
          await source.undoLastMigration();
          expect(await source.createQueryRunner().hasTable('idempotency_keys')).toBe(false);
        } finally {
          if (source.isInitialized) await source.destroy();
          await migrated.drop();
        }
      });
    },
  );
}
