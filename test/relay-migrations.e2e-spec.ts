import { DataSource } from 'typeorm';
import { CreateOutboxTables1764374400000, OutboxKeyLock, OutboxMessage } from '../src';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(servicesOf(kind), `Outbox migration on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useTestDatabase(kind);
    let ds: DataSource;

    beforeAll(async () => {
      ds = new DataSource({ ...fx.db.options, entities: [OutboxMessage, OutboxKeyLock], migrations: [CreateOutboxTables1764374400000], logging: false } as never);
      await ds.initialize();
      fx.defer(() => ds.destroy());
    });

    it('creates exactly the schema of the entities (nothing left for synchronize to change), and reverts', async () => {
      expect((await ds.runMigrations()).map((m) => m.name)).toEqual(['CreateOutboxTables1764374400000']);
      const pending = await ds.driver.createSchemaBuilder().log();
      expect(pending.upQueries.map((q) => q.query)).toEqual([]);
      await ds.undoLastMigration();
      const runner = ds.createQueryRunner();
      try {
        expect(await runner.hasTable('outbox_messages')).toBe(false);
        expect(await runner.hasTable('outbox_key_locks')).toBe(false);
      } finally {
        await runner.release();
      }
    });
  });
}
