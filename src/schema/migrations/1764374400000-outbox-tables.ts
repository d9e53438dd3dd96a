import type { MigrationInterface, QueryRunner } from 'typeorm';
import type { OutboxTableNames } from '../outbox-table-names';
import { migrationNames, SHIPPED_TABLES, type MigrationNames } from './migration-names';

/**
 * Creates `outbox_messages` (the table of `OutboxMessage`, with the claim, per-key and cleanup indexes) and
 * `outbox_key_locks` (used on MySQL/MariaDB to number a key's messages in commit order) on PostgreSQL,
 * MySQL/MariaDB or SQLite, picked from the connection. Times are epoch milliseconds (BIGINT).
 * (`outboxMigrations({ prefix, schema })` gives it for other table names; with a schema it creates the schema.)
 *
 * ```ts
 * TypeOrmModule.forRoot({ …, migrations: [CreateOutboxTables1764374400000], migrationsRun: true })
 * ```
 */
export class CreateOutboxTables1764374400000 implements MigrationInterface {
  name = 'CreateOutboxTables1764374400000';
  /** The table set it creates (the shipped names; `outboxMigrations()` sets others). */
  tables: OutboxTableNames = SHIPPED_TABLES;

  async up(queryRunner: QueryRunner): Promise<void> {
    const type = queryRunner.connection.options.type;
    for (const sql of createStatements(type, migrationNames(type, this.tables))) await queryRunner.query(sql);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const n = migrationNames(queryRunner.connection.options.type, this.tables);
    await queryRunner.query(`DROP TABLE ${n.messages}`);
    await queryRunner.query(`DROP TABLE ${n.keyLocks}`);
  }
}

function createStatements(type: string, n: MigrationNames): string[] {
  const { q, messages: t, keyLocks: locks } = n;
  const i = n.index.messages;
  switch (type) {
    case 'postgres':
      return [
        ...(n.tables.schema === undefined ? [] : [`CREATE SCHEMA IF NOT EXISTS ${q(n.tables.schema)}`]),
        `CREATE TABLE ${locks} ("bucket" integer NOT NULL, "n" bigint NOT NULL DEFAULT '0', ` +
          `CONSTRAINT ${q(n.index.keyLocks.primaryKey)} PRIMARY KEY ("bucket"))`,
        `CREATE TABLE ${t} ("seq" BIGSERIAL NOT NULL, "message_id" character varying(255) NOT NULL, ` +
          `"pattern" character varying(255) NOT NULL, "payload" text NOT NULL, "headers" text, ` +
          `"ordering_key" character varying(255), "status" character varying(16) NOT NULL DEFAULT 'pending', ` +
          `"attempts" integer NOT NULL DEFAULT '0', "available_at" bigint NOT NULL, "created_at" bigint NOT NULL, ` +
          `"sent_at" bigint, "claimed_by" character varying(36), "claimed_until" bigint, "last_error" text, ` +
          `CONSTRAINT ${q(i.primaryKey)} PRIMARY KEY ("seq"))`,
        `CREATE UNIQUE INDEX ${q(i.legacyMessageIdUnique)} ON ${t} ("message_id")`,
        `CREATE INDEX ${q(i.cleanup)} ON ${t} ("status", "sent_at")`,
        `CREATE INDEX ${q(i.legacyKey)} ON ${t} ("ordering_key", "status", "seq")`,
        `CREATE INDEX ${q(i.claim)} ON ${t} ("status", "seq")`,
      ];
    case 'mysql':
    case 'mariadb':
      return [
        `CREATE TABLE ${locks} (\`bucket\` int NOT NULL, \`n\` bigint NOT NULL DEFAULT 0, ` +
          'PRIMARY KEY (`bucket`)) ENGINE=InnoDB',
        `CREATE TABLE ${t} (\`seq\` bigint NOT NULL AUTO_INCREMENT, \`message_id\` varchar(255) NOT NULL, ` +
          '`pattern` varchar(255) NOT NULL, `payload` text NOT NULL, `headers` text NULL, ' +
          "`ordering_key` varchar(255) NULL, `status` varchar(16) NOT NULL DEFAULT 'pending', " +
          '`attempts` int NOT NULL DEFAULT 0, `available_at` bigint NOT NULL, `created_at` bigint NOT NULL, ' +
          '`sent_at` bigint NULL, `claimed_by` varchar(36) NULL, `claimed_until` bigint NULL, ' +
          `\`last_error\` text NULL, UNIQUE INDEX ${q(i.legacyMessageIdUnique)} (\`message_id\`), ` +
          `INDEX ${q(i.cleanup)} (\`status\`, \`sent_at\`), ` +
          `INDEX ${q(i.legacyKey)} (\`ordering_key\`, \`status\`, \`seq\`), ` +
          `INDEX ${q(i.claim)} (\`status\`, \`seq\`), PRIMARY KEY (\`seq\`)) ENGINE=InnoDB`,
      ];
    case 'better-sqlite3':
    case 'sqlite':
      return [
        `CREATE TABLE ${locks} ("bucket" integer PRIMARY KEY NOT NULL, "n" bigint NOT NULL DEFAULT (0))`,
        `CREATE TABLE ${t} ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, ` +
          `"message_id" varchar(255) NOT NULL, "pattern" varchar(255) NOT NULL, "payload" text NOT NULL, ` +
          `"headers" text, "ordering_key" varchar(255), "status" varchar(16) NOT NULL DEFAULT ('pending'), ` +
          `"attempts" integer NOT NULL DEFAULT (0), "available_at" bigint NOT NULL, "created_at" bigint NOT NULL, ` +
          `"sent_at" bigint, "claimed_by" varchar(36), "claimed_until" bigint, "last_error" text)`,
        `CREATE UNIQUE INDEX ${q(i.legacyMessageIdUnique)} ON ${t} ("message_id")`,
        `CREATE INDEX ${q(i.cleanup)} ON ${t} ("status", "sent_at")`,
        `CREATE INDEX ${q(i.legacyKey)} ON ${t} ("ordering_key", "status", "seq")`,
        `CREATE INDEX ${q(i.claim)} ON ${t} ("status", "seq")`,
      ];
    default:
      throw new Error(
        `CreateOutboxTables1764374400000 does not support the TypeORM driver '${type}'. ` +
          'Use PostgreSQL, MySQL/MariaDB or SQLite.',
      );
  }
}
