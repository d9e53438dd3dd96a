import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Creates `outbox_messages` (the table of `OutboxMessage`, with the claim, per-key and cleanup indexes) and
 * `outbox_key_locks` (used on MySQL/MariaDB to number a key's messages in commit order) on PostgreSQL,
 * MySQL/MariaDB or SQLite, picked from the connection. Times are epoch milliseconds (BIGINT).
 *
 * ```ts
 * TypeOrmModule.forRoot({ …, migrations: [CreateOutboxTables1764374400000], migrationsRun: true })
 * ```
 */
export class CreateOutboxTables1764374400000 implements MigrationInterface {
  name = 'CreateOutboxTables1764374400000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const sql of createStatements(queryRunner.connection.options.type)) await queryRunner.query(sql);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const type = queryRunner.connection.options.type;
    const q = type === 'mysql' || type === 'mariadb' ? '`' : '"';
    await queryRunner.query(`DROP TABLE ${q}outbox_messages${q}`);
    await queryRunner.query(`DROP TABLE ${q}outbox_key_locks${q}`);
  }
}

function createStatements(type: string): string[] {
  switch (type) {
    case 'postgres':
      return [
        `CREATE TABLE "outbox_key_locks" ("bucket" integer NOT NULL, "n" bigint NOT NULL DEFAULT '0', ` +
          `CONSTRAINT "PK_794d48abf644d4601dbc4ad193b" PRIMARY KEY ("bucket"))`,
        `CREATE TABLE "outbox_messages" ("seq" BIGSERIAL NOT NULL, "message_id" character varying(255) NOT NULL, ` +
          `"pattern" character varying(255) NOT NULL, "payload" text NOT NULL, "headers" text, ` +
          `"ordering_key" character varying(255), "status" character varying(16) NOT NULL DEFAULT 'pending', ` +
          `"attempts" integer NOT NULL DEFAULT '0', "available_at" bigint NOT NULL, "created_at" bigint NOT NULL, ` +
          `"sent_at" bigint, "claimed_by" character varying(36), "claimed_until" bigint, "last_error" text, ` +
          `CONSTRAINT "PK_d24ca6550fc486f101fe4f8b021" PRIMARY KEY ("seq"))`,
        `CREATE UNIQUE INDEX "UQ_outbox_messages_message_id" ON "outbox_messages" ("message_id")`,
        `CREATE INDEX "IDX_outbox_messages_cleanup" ON "outbox_messages" ("status", "sent_at")`,
        `CREATE INDEX "IDX_outbox_messages_key" ON "outbox_messages" ("ordering_key", "status", "seq")`,
        `CREATE INDEX "IDX_outbox_messages_claim" ON "outbox_messages" ("status", "seq")`,
      ];
    case 'mysql':
    case 'mariadb':
      return [
        'CREATE TABLE `outbox_key_locks` (`bucket` int NOT NULL, `n` bigint NOT NULL DEFAULT 0, ' +
          'PRIMARY KEY (`bucket`)) ENGINE=InnoDB',
        'CREATE TABLE `outbox_messages` (`seq` bigint NOT NULL AUTO_INCREMENT, `message_id` varchar(255) NOT NULL, ' +
          '`pattern` varchar(255) NOT NULL, `payload` text NOT NULL, `headers` text NULL, ' +
          "`ordering_key` varchar(255) NULL, `status` varchar(16) NOT NULL DEFAULT 'pending', " +
          '`attempts` int NOT NULL DEFAULT 0, `available_at` bigint NOT NULL, `created_at` bigint NOT NULL, ' +
          '`sent_at` bigint NULL, `claimed_by` varchar(36) NULL, `claimed_until` bigint NULL, ' +
          '`last_error` text NULL, UNIQUE INDEX `UQ_outbox_messages_message_id` (`message_id`), ' +
          'INDEX `IDX_outbox_messages_cleanup` (`status`, `sent_at`), ' +
          'INDEX `IDX_outbox_messages_key` (`ordering_key`, `status`, `seq`), ' +
          'INDEX `IDX_outbox_messages_claim` (`status`, `seq`), PRIMARY KEY (`seq`)) ENGINE=InnoDB',
      ];
    case 'better-sqlite3':
    case 'sqlite':
      return [
        `CREATE TABLE "outbox_key_locks" ("bucket" integer PRIMARY KEY NOT NULL, "n" bigint NOT NULL DEFAULT (0))`,
        `CREATE TABLE "outbox_messages" ("seq" integer PRIMARY KEY AUTOINCREMENT NOT NULL, ` +
          `"message_id" varchar(255) NOT NULL, "pattern" varchar(255) NOT NULL, "payload" text NOT NULL, ` +
          `"headers" text, "ordering_key" varchar(255), "status" varchar(16) NOT NULL DEFAULT ('pending'), ` +
          `"attempts" integer NOT NULL DEFAULT (0), "available_at" bigint NOT NULL, "created_at" bigint NOT NULL, ` +
          `"sent_at" bigint, "claimed_by" varchar(36), "claimed_until" bigint, "last_error" text)`,
        `CREATE UNIQUE INDEX "UQ_outbox_messages_message_id" ON "outbox_messages" ("message_id")`,
        `CREATE INDEX "IDX_outbox_messages_cleanup" ON "outbox_messages" ("status", "sent_at")`,
        `CREATE INDEX "IDX_outbox_messages_key" ON "outbox_messages" ("ordering_key", "status", "seq")`,
        `CREATE INDEX "IDX_outbox_messages_claim" ON "outbox_messages" ("status", "seq")`,
      ];
    default:
      throw new Error(
        `CreateOutboxTables1764374400000 does not support the TypeORM driver '${type}'. ` +
          'Use PostgreSQL, MySQL/MariaDB or SQLite.',
      );
  }
}
