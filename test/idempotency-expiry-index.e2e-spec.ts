import { DataSource } from 'typeorm';
import { OUTBOX_MIGRATIONS, outboxEntities } from '../src';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { IdempotencyExpiryBrin1765584000000 } from '../src/schema/migrations/1765584000000-idempotency-expiry-brin';
import { IdempotencyService } from '../src/idempotency/idempotency.service';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];
const HOUR = 3_600_000;

/** The access method of the expiry index of `idempotency_keys` on PostgreSQL (`brin`, `btree`). */
async function expiryIndexMethod(ds: DataSource): Promise<string> {
  const [row] = await ds.query(
    `SELECT indexdef FROM pg_indexes WHERE tablename = 'idempotency_keys' AND indexname = 'IDX_idempotency_keys_expires_at'`,
  );
  return /USING (\w+)/.exec(row.indexdef)![1];
}

for (const kind of kinds) {
  describeWith(servicesOf(kind), `The expiry index of idempotency_keys on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useTestDatabase(kind, { per: 'test' });

    /** The shipped migrations, run on the test database; the DataSource is closed at teardown. */
    async function migrated(): Promise<DataSource> {
      const ds = new DataSource({
        ...fx.db.options,
        entities: outboxEntities(),
        migrations: [...OUTBOX_MIGRATIONS],
        logging: false,
      } as never);
      await ds.initialize();
      fx.defer(() => ds.destroy());
      const ran = (await ds.runMigrations()).map((m) => m.name);
      expect(ran.slice(-4)).toEqual([
        'IdempotencyExpiryBrin1765584000000',
        'AddOutboxExpiry1765670400000',
        'AddOutboxCause1765756800000',
        'AddOutboxEditAudit1765843200000',
      ]);
      return ds;
    }

    it('is BRIN on PostgreSQL after the shipped migrations (a B-tree elsewhere), and a B-tree again after down()', async () => {
      const ds = await migrated();
      // Nothing left for synchronize: it compares an index's name and columns, not its access method.
      const pending = await ds.driver.createSchemaBuilder().log();
      const mediumText = /`\w*idempotency_keys` (DROP COLUMN|ADD) `response_body`/; // MySQL/MariaDB, on purpose
      expect(pending.upQueries.map((q) => q.query).filter((q) => !mediumText.test(q))).toEqual([]);
      if (kind === 'postgres') {
        expect(await expiryIndexMethod(ds)).toBe('brin');
        const [{ reloptions }] = await ds.query(
          `SELECT reloptions FROM pg_class WHERE relname = 'IDX_idempotency_keys_expires_at'`,
        );
        expect(reloptions).toEqual(expect.arrayContaining(['pages_per_range=32', 'autosummarize=on']));
      }
      await ds.undoLastMigration(); // AddOutboxEditAudit1765843200000, the newest
      await ds.undoLastMigration(); // AddOutboxCause1765756800000
      await ds.undoLastMigration(); // AddOutboxExpiry1765670400000
      await ds.undoLastMigration();
      if (kind === 'postgres') expect(await expiryIndexMethod(ds)).toBe('btree');
      const runner = ds.createQueryRunner();
      try {
        const index = (await runner.getTable('idempotency_keys'))!.indices.find((i) =>
          i.columnNames.includes('expires_at'),
        );
        expect(index?.name).toBe('IDX_idempotency_keys_expires_at');
      } finally {
        await runner.release();
      }
    });

    it('keeps the BRIN index under an app that synchronizes, and the cleanup deletes expired keys only', async () => {
      const ds = await migrated();
      const app = await fx.start({
        logger: false,
        outbox: { publisher: { enabled: false }, idempotency: { ttl: HOUR } },
      });
      if (kind === 'postgres') expect(await expiryIndexMethod(ds)).toBe('brin');
      const now = Date.now();
      const records = ds.getRepository(IdempotencyRecord);
      // Enough rows to span several 32-page block ranges, expired and live interleaved as a mixed-TTL app writes.
      const rows = Array.from({ length: 3000 }, (_, n) => ({
        scope: 's',
        key: `k-${n}`,
        fingerprint: 'f'.repeat(64),
        responseStatus: 201,
        responseBody: JSON.stringify({ n, padding: 'x'.repeat(200) }),
        responseHeaders: null,
        createdAt: new Date(now - 2 * HOUR),
        expiresAt: new Date(n % 3 === 0 ? now + HOUR : now - HOUR),
      }));
      for (let i = 0; i < rows.length; i += 500) await records.insert(rows.slice(i, i + 500));
      if (kind === 'postgres') await ds.query(`SELECT brin_summarize_new_values('"IDX_idempotency_keys_expires_at"')`);
      const idempotency = app.get(IdempotencyService);
      let deleted = 0;
      for (let batch = await idempotency.deleteExpired(700); batch > 0; batch = await idempotency.deleteExpired(700)) {
        expect(batch).toBeLessThanOrEqual(700);
        deleted += batch;
      }
      expect(deleted).toBe(2000);
      const left = await records.find({ select: { key: true } });
      expect(left.map((r) => r.key).sort()).toEqual(
        rows
          .filter((_, n) => n % 3 === 0)
          .map((r) => r.key)
          .sort(),
      );
      // A live key is still answered from its record, and an expired one can be taken again.
      expect((await idempotency.read('s', 'k-0'))?.status).toBe(201);
      expect(await idempotency.read('s', 'k-1')).toBeUndefined();
    });

    it('is exported for apps that list migrations one by one', () => {
      expect(OUTBOX_MIGRATIONS).toContain(IdempotencyExpiryBrin1765584000000);
    });
  });
}
