import { DataSource } from 'typeorm';
import { OutboxMessage } from '../src';
import { CreateOutboxTables1764374400000 } from '../src/schema/migrations/1764374400000-outbox-tables';
import { AddOutboxAttempts1765152000000 } from '../src/schema/migrations/1765152000000-outbox-attempts';
import { AddOutboxDestinations1765497600000 } from '../src/schema/migrations/1765497600000-outbox-destinations';
import { AddOutboxExpiry1765670400000 } from '../src/schema/migrations/1765670400000-outbox-expiry';
import { AddOutboxCause1765756800000 } from '../src/schema/migrations/1765756800000-outbox-cause';
import { AddOutboxEditAudit1765843200000 } from '../src/schema/migrations/1765843200000-outbox-edit-audit';
import { OutboxAttempt } from '../src/schema/outbox-attempt.entity';
import { OutboxKeyLock } from '../src/schema/outbox-key-lock.entity';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(servicesOf(kind), `Outbox migrations on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useTestDatabase(kind);
    let ds: DataSource;

    beforeAll(async () => {
      ds = new DataSource({
        ...fx.db.options,
        entities: [OutboxMessage, OutboxKeyLock, OutboxAttempt],
        migrations: [
          CreateOutboxTables1764374400000,
          AddOutboxAttempts1765152000000,
          AddOutboxDestinations1765497600000,
          AddOutboxExpiry1765670400000,
          AddOutboxCause1765756800000,
          AddOutboxEditAudit1765843200000,
        ],
        logging: false,
      } as never);
      await ds.initialize();
      fx.defer(() => ds.destroy());
    });

    it('create exactly the schema of the entities (nothing left for synchronize to change), and revert', async () => {
      expect((await ds.runMigrations()).map((m) => m.name)).toEqual([
        'CreateOutboxTables1764374400000',
        'AddOutboxAttempts1765152000000',
        'AddOutboxDestinations1765497600000',
        'AddOutboxExpiry1765670400000',
        'AddOutboxCause1765756800000',
        'AddOutboxEditAudit1765843200000',
      ]);
      const pending = await ds.driver.createSchemaBuilder().log();
      expect(pending.upQueries.map((q) => q.query)).toEqual([]);
      const runner = ds.createQueryRunner();
      try {
        expect(await runner.hasColumn('outbox_messages', 'edit_audit')).toBe(true);
        await ds.undoLastMigration();
        expect(await runner.hasColumn('outbox_messages', 'edit_audit')).toBe(false);
        expect(await runner.hasColumn('outbox_messages', 'cause_key')).toBe(true);
        await ds.undoLastMigration();
        expect(await runner.hasColumn('outbox_messages', 'cause_key')).toBe(false);
        expect(await runner.hasColumn('outbox_messages', 'cause_scope')).toBe(false);
        expect(await runner.hasColumn('outbox_messages', 'expires_at')).toBe(true);
        await ds.undoLastMigration();
        expect(await runner.hasColumn('outbox_messages', 'expires_at')).toBe(false);
        expect(await runner.hasColumn('outbox_messages', 'destination')).toBe(true);
        await ds.undoLastMigration();
        expect(await runner.hasColumn('outbox_messages', 'destination')).toBe(false);
        const unique = (await runner.getTable('outbox_messages'))!.indices.find((i) => i.isUnique);
        expect(unique?.columnNames).toEqual(['message_id']);
        await ds.undoLastMigration();
        expect(await runner.hasTable('outbox_attempts')).toBe(false);
        expect(await runner.hasColumn('outbox_messages', 'dead_at')).toBe(false);
        await ds.undoLastMigration();
        expect(await runner.hasTable('outbox_messages')).toBe(false);
        expect(await runner.hasTable('outbox_key_locks')).toBe(false);
      } finally {
        await runner.release();
      }
    });

    it('AddOutboxAttempts dates the rows that were already dead from their available_at', async () => {
      await ds.runMigrations({ transaction: 'each' });
      await ds.undoLastMigration();
      await ds.undoLastMigration();
      await ds.undoLastMigration();
      await ds.undoLastMigration();
      await ds.undoLastMigration();
      const t = (n: string) => ds.driver.escape(n);
      await ds.query(
        `INSERT INTO ${t('outbox_messages')} (${['message_id', 'pattern', 'payload', 'status', 'attempts', 'available_at', 'created_at'].map(t).join(', ')}) ` +
          `VALUES ('d1', 'E', '{}', 'dead', 3, 5000, 1000), ('p1', 'E', '{}', 'pending', 0, 7000, 1000)`,
      );
      await ds.runMigrations();
      const rows = await ds.getRepository(OutboxMessage).find({ order: { seq: 'ASC' } });
      expect(rows.map((r) => [r.messageId, r.deadAt?.getTime() ?? null])).toEqual([
        ['d1', 5000],
        ['p1', null],
      ]);
    });

    it("AddOutboxDestinations gives the rows already there the destination '' (every destination, as before)", async () => {
      const rows = await ds.getRepository(OutboxMessage).find({ order: { seq: 'ASC' } });
      expect(rows.map((r) => [r.messageId, r.destination])).toEqual([
        ['d1', ''],
        ['p1', ''],
      ]);
      // Unique per (message id, destination): a second row of a message for another destination fits.
      const t = (n: string) => ds.driver.escape(n);
      const insert = (destination: string) =>
        ds.query(
          `INSERT INTO ${t('outbox_messages')} (${['message_id', 'destination', 'pattern', 'payload', 'status', 'attempts', 'available_at', 'created_at'].map(t).join(', ')}) ` +
            `VALUES ('p1', '${destination}', 'E', '{}', 'pending', 0, 7000, 1000)`,
        );
      await insert('handler:h');
      await expect(insert('handler:h')).rejects.toThrow();
    });

    it('AddOutboxExpiry leaves the rows already there without an expiry (they never expire, as before)', async () => {
      const rows = await ds.getRepository(OutboxMessage).find({ order: { seq: 'ASC' } });
      expect(rows.map((r) => [r.messageId, r.expiresAt])).toEqual([
        ['d1', null],
        ['p1', null],
        ['p1', null],
      ]);
    });

    it('AddOutboxCause leaves the rows already there without a cause, and indexes cause_key', async () => {
      const rows = await ds.getRepository(OutboxMessage).find({ order: { seq: 'ASC' } });
      expect(rows.map((r) => [r.messageId, r.causeScope, r.causeKey])).toEqual([
        ['d1', null, null],
        ['p1', null, null],
        ['p1', null, null],
      ]);
      const runner = ds.createQueryRunner();
      try {
        const index = (await runner.getTable('outbox_messages'))!.indices.find(
          (i) => i.name === 'IDX_outbox_messages_cause',
        );
        expect(index?.columnNames).toEqual(['cause_key']);
      } finally {
        await runner.release();
      }
    });
  });
}
