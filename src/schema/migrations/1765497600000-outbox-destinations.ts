import type { MigrationInterface, QueryRunner } from 'typeorm';
import type { OutboxTableNames } from '../outbox-table-names';
import { dropIndex, migrationNames, SHIPPED_TABLES, type MigrationNames } from './migration-names';

/**
 * Per-destination delivery, on PostgreSQL, MySQL/MariaDB or SQLite (picked from the connection):
 *
 * - `outbox_messages.destination` (`varchar(255) NOT NULL DEFAULT ''`): where the row goes. Rows already in the
 *   table get `''`, which means what every row meant before: all destinations of the message, decided when it is
 *   published — so they are delivered as before, and a rolling upgrade is safe.
 * - the unique index on `message_id` (`UQ_outbox_messages_message_id`) becomes unique on `(message_id,
 *   destination)` (`UQ_outbox_messages_message_destination`): a message is one row per destination, all with its id;
 * - the per-key index `IDX_outbox_messages_key (ordering_key, status, seq)` becomes
 *   `IDX_outbox_messages_key_destination (ordering_key, status, destination, seq)`: a key's order holds per
 *   destination.
 *
 * Run it after `AddOutboxAttempts1765152000000` (`migrations: [...OUTBOX_MIGRATIONS]` lists it).
 * (`outboxMigrations({ prefix, schema })` gives it for other table names.)
 */
export class AddOutboxDestinations1765497600000 implements MigrationInterface {
  name = 'AddOutboxDestinations1765497600000';
  /** The table set it changes (the shipped names; `outboxMigrations()` sets others). */
  tables: OutboxTableNames = SHIPPED_TABLES;

  async up(queryRunner: QueryRunner): Promise<void> {
    const type = checkType(queryRunner.connection.options.type);
    for (const sql of upStatements(migrationNames(type, this.tables), type)) await queryRunner.query(sql);
  }

  /** Back to one row per message: fails (unique violation) while a message still has several rows. */
  async down(queryRunner: QueryRunner): Promise<void> {
    const type = checkType(queryRunner.connection.options.type);
    for (const sql of downStatements(migrationNames(type, this.tables))) await queryRunner.query(sql);
  }
}

function checkType(type: string): string {
  if (['postgres', 'mysql', 'mariadb', 'better-sqlite3', 'sqlite'].includes(type)) return type;
  throw new Error(
    `AddOutboxDestinations1765497600000 does not support the TypeORM driver '${type}'. ` +
      'Use PostgreSQL, MySQL/MariaDB or SQLite.',
  );
}

function upStatements(n: MigrationNames, type: string): string[] {
  const { q, messages: t } = n;
  const i = n.index.messages;
  if (n.mysql) {
    return [
      `ALTER TABLE ${t} ADD ${q('destination')} varchar(255) NOT NULL DEFAULT '', ` +
        `DROP INDEX ${q(i.legacyMessageIdUnique)}, DROP INDEX ${q(i.legacyKey)}, ` +
        `ADD UNIQUE INDEX ${q(i.messageIdUnique)} (${q('message_id')}, ${q('destination')}), ` +
        `ADD INDEX ${q(i.key)} (${q('ordering_key')}, ${q('status')}, ${q('destination')}, ${q('seq')})`,
    ];
  }
  const add =
    type === 'postgres'
      ? `ALTER TABLE ${t} ADD ${q('destination')} character varying(255) NOT NULL DEFAULT ''`
      : `ALTER TABLE ${t} ADD COLUMN ${q('destination')} varchar(255) NOT NULL DEFAULT ('')`;
  return [
    add,
    dropIndex(n, i.legacyMessageIdUnique, t),
    `CREATE UNIQUE INDEX ${q(i.messageIdUnique)} ON ${t} (${q('message_id')}, ${q('destination')})`,
    dropIndex(n, i.legacyKey, t),
    `CREATE INDEX ${q(i.key)} ON ${t} (${q('ordering_key')}, ${q('status')}, ${q('destination')}, ${q('seq')})`,
  ];
}

function downStatements(n: MigrationNames): string[] {
  const { q, messages: t } = n;
  const i = n.index.messages;
  if (n.mysql) {
    return [
      `ALTER TABLE ${t} DROP INDEX ${q(i.messageIdUnique)}, DROP INDEX ${q(i.key)}, DROP COLUMN ${q('destination')}, ` +
        `ADD UNIQUE INDEX ${q(i.legacyMessageIdUnique)} (${q('message_id')}), ` +
        `ADD INDEX ${q(i.legacyKey)} (${q('ordering_key')}, ${q('status')}, ${q('seq')})`,
    ];
  }
  return [
    dropIndex(n, i.messageIdUnique, t),
    dropIndex(n, i.key, t),
    `ALTER TABLE ${t} DROP COLUMN ${q('destination')}`,
    `CREATE UNIQUE INDEX ${q(i.legacyMessageIdUnique)} ON ${t} (${q('message_id')})`,
    `CREATE INDEX ${q(i.legacyKey)} ON ${t} (${q('ordering_key')}, ${q('status')}, ${q('seq')})`,
  ];
}
