import { DataSource } from 'typeorm';
import { OUTBOX_MIGRATIONS, outboxEntities, outboxMigrations } from '../src';
import type { OutboxTablesOptions } from '../src/schema/outbox-table-names';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

/** The table paths a set of options names. */
function tablesOf({ prefix = '', schema }: OutboxTablesOptions): string[] {
  const names = ['outbox_messages', 'outbox_key_locks', 'idempotency_keys', 'outbox_attempts', 'idempotency_steps'];
  return names.map((n) => (schema ? `${schema}.${prefix}${n}` : `${prefix}${n}`));
}

for (const kind of kinds) {
  describeWith(servicesOf(kind), `outboxMigrations() beside the shipped migrations on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useTestDatabase(kind, { per: 'test' });
    // Two prefixed sets beside the shipped one in one database/schema, and (PostgreSQL) one more in a schema.
    const sets: OutboxTablesOptions[] = [
      { prefix: 'billing_' },
      { prefix: 'b2' },
      ...(kind === 'postgres' ? [{ schema: `billing_${Date.now().toString(36)}`, prefix: 'x_' }] : []),
    ];

    it('create exactly the schema of outboxEntities() for each set (nothing left for synchronize), and revert', async () => {
      const ds = new DataSource({
        ...fx.db.options,
        entities: [...outboxEntities(), ...sets.flatMap((s) => outboxEntities(s))],
        migrations: [...OUTBOX_MIGRATIONS, ...sets.flatMap((s) => outboxMigrations(s))],
        logging: false,
      } as never);
      await ds.initialize();
      fx.defer(async () => {
        if (kind === 'postgres') {
          for (const s of sets) if (s.schema) await ds.query(`DROP SCHEMA IF EXISTS "${s.schema}" CASCADE`);
        }
        await ds.destroy();
      });

      const ran = (await ds.runMigrations()).map((m) => m.name);
      // Every set's nine migrations, recorded under names of their own, in timestamp order.
      expect(ran).toHaveLength(9 * (sets.length + 1));
      expect(ran.filter((n) => n.startsWith('CreateOutboxTables'))).toEqual([
        'CreateOutboxTables1764374400000',
        'CreateOutboxTables_billing_1764374400000',
        'CreateOutboxTables_b21764374400000',
        ...(kind === 'postgres' ? [`CreateOutboxTables_${sets[2].schema}.x_1764374400000`] : []),
      ]);
      expect(ran.map((n) => n.slice(-13))).toEqual([...ran.map((n) => n.slice(-13))].sort());

      const pending = await ds.driver.createSchemaBuilder().log();
      // On MySQL/MariaDB the migration makes response_body MEDIUMTEXT on purpose (the entity says TEXT, 64 KB there).
      const mediumText = /`\w*idempotency_keys` (DROP COLUMN|ADD) `response_body`/;
      expect(pending.upQueries.map((q) => q.query).filter((q) => !mediumText.test(q))).toEqual([]);

      const runner = ds.createQueryRunner();
      try {
        for (const s of [{}, ...sets]) {
          for (const table of tablesOf(s))
            expect({ table, exists: await runner.hasTable(table) }).toEqual({ table, exists: true });
        }
        // Index names are derived from the table: the sets' indexes never collide.
        const index = ds
          .getMetadata(outboxEntities(sets[0])[0])
          .indices.map((i) => i.name)
          .sort();
        expect(index).toEqual([
          'IDX_billing_outbox_messages_cause',
          'IDX_billing_outbox_messages_claim',
          'IDX_billing_outbox_messages_cleanup',
          'IDX_billing_outbox_messages_dead',
          'IDX_billing_outbox_messages_key_destination',
          'UQ_billing_outbox_messages_message_destination',
        ]);
        // The newest one adds each set's own edit_audit column; the one before, its cause columns; the one before
        // that, its expires_at column.
        for (const _ of [{}, ...sets]) await ds.undoLastMigration();
        for (const s of [{}, ...sets]) {
          const [messages] = tablesOf(s);
          expect({ messages, audit: await runner.hasColumn(messages, 'edit_audit') }).toEqual({
            messages,
            audit: false,
          });
          expect({ messages, cause: await runner.hasColumn(messages, 'cause_key') }).toEqual({ messages, cause: true });
        }
        for (const _ of [{}, ...sets]) await ds.undoLastMigration();
        for (const s of [{}, ...sets]) {
          const [messages] = tablesOf(s);
          expect({ messages, cause: await runner.hasColumn(messages, 'cause_key') }).toEqual({
            messages,
            cause: false,
          });
        }
        for (const _ of [{}, ...sets]) await ds.undoLastMigration();
        for (const s of [{}, ...sets]) {
          const [messages] = tablesOf(s);
          expect({ messages, expiry: await runner.hasColumn(messages, 'expires_at') }).toEqual({
            messages,
            expiry: false,
          });
        }
        // The one before makes each set's expiry index a BRIN index on PostgreSQL (and changes nothing elsewhere);
        // reverting it gives each set its B-tree back.
        const expiryIndexes = async () =>
          kind !== 'postgres'
            ? []
            : (
                await ds.query(
                  `SELECT schemaname || '.' || tablename AS "table", indexdef FROM pg_indexes
                   WHERE tablename LIKE '%idempotency_keys' AND indexname LIKE '%expires_at' ORDER BY 1`,
                )
              ).map((r: { table: string; indexdef: string }) => `${r.table} ${/USING (\w+)/.exec(r.indexdef)![1]}`);
        const everySet = (method: string) =>
          kind !== 'postgres'
            ? []
            : [{}, ...sets].map((s) => `${s.schema ?? 'public'}.${s.prefix ?? ''}idempotency_keys ${method}`).sort();
        expect(await expiryIndexes()).toEqual(everySet('brin'));
        for (const _ of [{}, ...sets]) await ds.undoLastMigration();
        expect(await expiryIndexes()).toEqual(everySet('btree'));
        // Reverting the one before (the destinations) drops each set's own destination column.
        for (const _ of [{}, ...sets]) await ds.undoLastMigration();
        for (const s of [{}, ...sets]) {
          const [messages] = tablesOf(s);
          const columns = (await runner.getTable(messages))!.columns.map((c) => c.name);
          expect({ messages, destination: columns.includes('destination') }).toEqual({ messages, destination: false });
        }
        // The one before (the steps tables) drops each set's own steps table.
        for (const _ of [{}, ...sets]) await ds.undoLastMigration();
        for (const s of [{}, ...sets]) {
          const [messages, , , , steps] = tablesOf(s);
          expect(await runner.hasTable(steps)).toBe(false);
          expect(await runner.hasTable(messages)).toBe(true);
        }
        // And the rest of the way down drops every table.
        for (let left = ran.length - 5 * (sets.length + 1); left > 0; left--) await ds.undoLastMigration();
        for (const s of [{}, ...sets])
          for (const table of tablesOf(s)) expect(await runner.hasTable(table)).toBe(false);
      } finally {
        await runner.release();
      }
    });
  });
}
