import { DataSource } from 'typeorm';
import { IdempotencyStep } from '../src/schema/idempotency-step.entity';
import { CreateIdempotencySteps1765411200000 } from '../src/schema/migrations/1765411200000-idempotency-steps';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(servicesOf(kind), `Idempotency steps migration on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useTestDatabase(kind);

    it('creates exactly the schema of IdempotencyStep (nothing left for synchronize to change), and reverts', async () => {
      const ds = new DataSource({
        ...fx.db.options,
        entities: [IdempotencyStep],
        migrations: [CreateIdempotencySteps1765411200000],
        logging: false,
      } as never);
      await ds.initialize();
      fx.defer(() => ds.destroy());
      expect((await ds.runMigrations()).map((m) => m.name)).toEqual(['CreateIdempotencySteps1765411200000']);
      const pending = await ds.driver.createSchemaBuilder().log();
      expect(pending.upQueries.map((q) => q.query)).toEqual([]);
      await ds.undoLastMigration();
      const runner = ds.createQueryRunner();
      try {
        expect(await runner.hasTable('idempotency_steps')).toBe(false);
      } finally {
        await runner.release();
      }
    });
  });
}
