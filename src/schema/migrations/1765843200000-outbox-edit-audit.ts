import type { MigrationInterface, QueryRunner } from 'typeorm';
import type { OutboxTableNames } from '../outbox-table-names';
import { migrationNames, SHIPPED_TABLES } from './migration-names';

/**
 * The audit of edited dead letters (`OutboxDeadLetters.editAndRequeue()`), on PostgreSQL, MySQL/MariaDB or SQLite
 * (picked from the connection): `outbox_messages.edit_audit` (`text NULL`), written on the original row of an edit
 * when it becomes `replaced` — the corrected copy's id, when, who, why and what changed. Every other row keeps
 * `NULL`. Adding a nullable column without a default changes the catalog alone on each of the three databases.
 *
 * Run it after `AddOutboxCause1765756800000` (`migrations: [...OUTBOX_MIGRATIONS]` lists it).
 * (`outboxMigrations({ prefix, schema })` gives it for other table names.)
 */
export class AddOutboxEditAudit1765843200000 implements MigrationInterface {
  name = 'AddOutboxEditAudit1765843200000';
  /** The table set it changes (the shipped names; `outboxMigrations()` sets others). */
  tables: OutboxTableNames = SHIPPED_TABLES;

  async up(queryRunner: QueryRunner): Promise<void> {
    const { q, messages, mysql } = migrationNames(queryRunner.connection.options.type, this.tables);
    await queryRunner.query(`ALTER TABLE ${messages} ADD ${q('edit_audit')} text${mysql ? ' NULL' : ''}`);
  }

  /** Drops the column: the audits of past edits are forgotten (the replaced rows stay, with status `replaced`). */
  async down(queryRunner: QueryRunner): Promise<void> {
    const { q, messages } = migrationNames(queryRunner.connection.options.type, this.tables);
    await queryRunner.query(`ALTER TABLE ${messages} DROP COLUMN ${q('edit_audit')}`);
  }
}
