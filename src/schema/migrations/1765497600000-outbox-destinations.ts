import type { MigrationInterface, QueryRunner } from 'typeorm';

/** The names this migration touches, in one place. */
const NAMES = {
  table: 'outbox_messages',
  column: 'destination',
  /** Unique on `message_id` alone (made by `CreateOutboxTables1764374400000`), replaced by `unique`. */
  oldUnique: 'UQ_outbox_messages_message_id',
  unique: 'UQ_outbox_messages_message_destination',
  /** `(ordering_key, status, seq)` (made by `CreateOutboxTables1764374400000`), replaced by `key`. */
  oldKey: 'IDX_outbox_messages_key',
  key: 'IDX_outbox_messages_key_destination',
} as const;

/**
 * Per-destination delivery, on PostgreSQL, MySQL/MariaDB or SQLite (picked from the connection):
 *
 * - `outbox_messages.destination` (`varchar(255) NOT NULL DEFAULT ''`): where the row goes. Rows already in the
 *   table get `''`, which means what every row meant before: all destinations of the message, decided when it is
 *   published — so they are delivered as before, and a rolling upgrade is safe.
 * - the unique index on `message_id` becomes unique on `(message_id, destination)` (a message is one row per
 *   destination, all with its id);
 * - the per-key index `(ordering_key, status, seq)` becomes `(ordering_key, status, destination, seq)` (a key's order
 *   holds per destination).
 *
 * Run it after `AddOutboxAttempts1765152000000` (`migrations: [...OUTBOX_MIGRATIONS]` lists it).
 */
export class AddOutboxDestinations1765497600000 implements MigrationInterface {
  name = 'AddOutboxDestinations1765497600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const sql of upStatements(queryRunner.connection.options.type)) await queryRunner.query(sql);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const sql of downStatements(queryRunner.connection.options.type)) await queryRunner.query(sql);
  }
}

function isMysql(type: string): boolean {
  return type === 'mysql' || type === 'mariadb';
}

function checkType(type: string): void {
  if (['postgres', 'mysql', 'mariadb', 'better-sqlite3', 'sqlite'].includes(type)) return;
  throw new Error(
    `AddOutboxDestinations1765497600000 does not support the TypeORM driver '${type}'. ` +
      'Use PostgreSQL, MySQL/MariaDB or SQLite.',
  );
}

function upStatements(type: string): string[] {
  checkType(type);
  const { table, column, oldUnique, unique, oldKey, key } = NAMES;
  if (isMysql(type)) {
    const q = (name: string) => `\`${name}\``;
    return [
      `ALTER TABLE ${q(table)} ADD ${q(column)} varchar(255) NOT NULL DEFAULT '', ` +
        `DROP INDEX ${q(oldUnique)}, DROP INDEX ${q(oldKey)}, ` +
        `ADD UNIQUE INDEX ${q(unique)} (${q('message_id')}, ${q(column)}), ` +
        `ADD INDEX ${q(key)} (${q('ordering_key')}, ${q('status')}, ${q(column)}, ${q('seq')})`,
    ];
  }
  const q = (name: string) => `"${name}"`;
  const add =
    type === 'postgres'
      ? `ALTER TABLE ${q(table)} ADD ${q(column)} character varying(255) NOT NULL DEFAULT ''`
      : `ALTER TABLE ${q(table)} ADD COLUMN ${q(column)} varchar(255) NOT NULL DEFAULT ('')`;
  return [
    add,
    `DROP INDEX ${q(oldUnique)}`,
    `CREATE UNIQUE INDEX ${q(unique)} ON ${q(table)} (${q('message_id')}, ${q(column)})`,
    `DROP INDEX ${q(oldKey)}`,
    `CREATE INDEX ${q(key)} ON ${q(table)} (${q('ordering_key')}, ${q('status')}, ${q(column)}, ${q('seq')})`,
  ];
}

/** Back to one row per message: fails (unique violation) while a message still has several rows. */
function downStatements(type: string): string[] {
  checkType(type);
  const { table, column, oldUnique, unique, oldKey, key } = NAMES;
  if (isMysql(type)) {
    const q = (name: string) => `\`${name}\``;
    return [
      `ALTER TABLE ${q(table)} DROP INDEX ${q(unique)}, DROP INDEX ${q(key)}, DROP COLUMN ${q(column)}, ` +
        `ADD UNIQUE INDEX ${q(oldUnique)} (${q('message_id')}), ` +
        `ADD INDEX ${q(oldKey)} (${q('ordering_key')}, ${q('status')}, ${q('seq')})`,
    ];
  }
  const q = (name: string) => `"${name}"`;
  return [
    `DROP INDEX ${q(unique)}`,
    `DROP INDEX ${q(key)}`,
    `ALTER TABLE ${q(table)} DROP COLUMN ${q(column)}`,
    `CREATE UNIQUE INDEX ${q(oldUnique)} ON ${q(table)} (${q('message_id')})`,
    `CREATE INDEX ${q(oldKey)} ON ${q(table)} (${q('ordering_key')}, ${q('status')}, ${q('seq')})`,
  ];
}
