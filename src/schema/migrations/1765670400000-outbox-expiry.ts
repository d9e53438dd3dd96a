import type { MigrationInterface, QueryRunner } from 'typeorm';
import type { OutboxTableNames } from '../outbox-table-names';
import { migrationNames, SHIPPED_TABLES } from './migration-names';

/**
 * Message expiry (`emit(…, { expiresIn | expiresAt })`), on PostgreSQL, MySQL/MariaDB or SQLite (picked from the
 * connection): `outbox_messages.expires_at` (`bigint NULL`), epoch milliseconds on the database clock as
 * `available_at`. A message past it is never published (see docs/guarantees-and-limits.md). Rows already in the
 * table get `NULL`: they never expire, as before. No index: the relay reads the column only on rows it already
 * found through the claim index. Adding a nullable column without a default is a change of the catalog alone on
 * each of the three databases (no table rewrite).
 *
 * Run it after `IdempotencyExpiryBrin1765584000000` (`migrations: [...OUTBOX_MIGRATIONS]` lists it).
 * (`outboxMigrations({ prefix, schema })` gives it for other table names.)
 */
export class AddOutboxExpiry1765670400000 implements MigrationInterface {
  name = 'AddOutboxExpiry1765670400000';
  /** The table set it changes (the shipped names; `outboxMigrations()` sets others). */
  tables: OutboxTableNames = SHIPPED_TABLES;

  async up(queryRunner: QueryRunner): Promise<void> {
    const { q, messages } = migrationNames(queryRunner.connection.options.type, this.tables);
    await queryRunner.query(`ALTER TABLE ${messages} ADD ${q('expires_at')} bigint NULL`);
  }

  /** Drops the column: messages emitted with an expiry then never expire. */
  async down(queryRunner: QueryRunner): Promise<void> {
    const { q, messages } = migrationNames(queryRunner.connection.options.type, this.tables);
    await queryRunner.query(`ALTER TABLE ${messages} DROP COLUMN ${q('expires_at')}`);
  }
}
