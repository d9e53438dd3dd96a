import type { MigrationInterface, QueryRunner } from 'typeorm';
import type { OutboxTableNames } from '../outbox-table-names';
import { dropIndex, migrationNames, SHIPPED_TABLES } from './migration-names';

/**
 * The cause of each message (`OutboxService.trace()`), on PostgreSQL, MySQL/MariaDB or SQLite (picked from the
 * connection): `outbox_messages.cause_scope` and `cause_key` (`varchar(255) NULL`), the idempotency record (scope,
 * key) of the call whose transaction emitted the row — an `@Idempotent()` request or message handler, an
 * `@OnOutboxEvent()` handler (`outbox-handler:<name>`, the message id) or `once()` — and the index
 * `IDX_outbox_messages_cause` on `cause_key`, which finds what one call emitted. Rows already in the table, and
 * rows emitted outside such a call, get `NULL`: no cause.
 *
 * Adding nullable columns without a default changes the catalog alone on each of the three databases (no table
 * rewrite); building the index reads the table once (on PostgreSQL it holds writes to the table meanwhile: on a
 * very large table, create it `CONCURRENTLY` by hand first, under the same name, and this migration skips it).
 *
 * Run it after `AddOutboxExpiry1765670400000` (`migrations: [...OUTBOX_MIGRATIONS]` lists it).
 * (`outboxMigrations({ prefix, schema })` gives it for other table names.)
 */
export class AddOutboxCause1765756800000 implements MigrationInterface {
  name = 'AddOutboxCause1765756800000';
  /** The table set it changes (the shipped names; `outboxMigrations()` sets others). */
  tables: OutboxTableNames = SHIPPED_TABLES;

  async up(queryRunner: QueryRunner): Promise<void> {
    const n = migrationNames(queryRunner.connection.options.type, this.tables);
    const { q, messages } = n;
    const index = n.index.messages.cause;
    if (n.mysql) {
      await queryRunner.query(
        `ALTER TABLE ${messages} ADD ${q('cause_scope')} varchar(255) NULL, ADD ${q('cause_key')} varchar(255) NULL`,
      );
      await queryRunner.query(`CREATE INDEX ${q(index)} ON ${messages} (${q('cause_key')})`);
      return;
    }
    // SQLite adds one column per statement; PostgreSQL accepts the same.
    await queryRunner.query(`ALTER TABLE ${messages} ADD ${q('cause_scope')} varchar(255) NULL`);
    await queryRunner.query(`ALTER TABLE ${messages} ADD ${q('cause_key')} varchar(255) NULL`);
    await queryRunner.query(`CREATE INDEX IF NOT EXISTS ${q(index)} ON ${messages} (${q('cause_key')})`);
  }

  /** Drops the index and the columns: the messages' causes are forgotten. */
  async down(queryRunner: QueryRunner): Promise<void> {
    const n = migrationNames(queryRunner.connection.options.type, this.tables);
    const { q, messages } = n;
    await queryRunner.query(dropIndex(n, n.index.messages.cause, messages));
    if (n.mysql) {
      await queryRunner.query(`ALTER TABLE ${messages} DROP COLUMN ${q('cause_key')}, DROP COLUMN ${q('cause_scope')}`);
      return;
    }
    await queryRunner.query(`ALTER TABLE ${messages} DROP COLUMN ${q('cause_key')}`);
    await queryRunner.query(`ALTER TABLE ${messages} DROP COLUMN ${q('cause_scope')}`);
  }
}
