import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Adds the attempt history and what the dead letters' pages need, on PostgreSQL, MySQL/MariaDB or SQLite (picked
 * from the connection):
 *
 * - `outbox_messages.dead_at` (epoch ms, 0 while not dead), filled for rows that are already dead from their
 *   `available_at` (the time they were marked dead), and the index `IDX_outbox_messages_dead (status, dead_at, seq)`
 *   that serves the newest-first keyset pages of `OutboxDeadLetters.page()`;
 * - `outbox_attempts`, the table of `OutboxAttempt`, with a foreign key to the message `ON DELETE CASCADE` (the
 *   history goes with its message) and the index `IDX_outbox_attempts_message (message_seq, id)`.
 *
 * Run it after `CreateOutboxTables1764374400000`; it changes nothing that migration made.
 *
 * ```ts
 * TypeOrmModule.forRoot({ …, migrations: [CreateOutboxTables1764374400000, AddOutboxAttempts1765152000000] })
 * ```
 */
export class AddOutboxAttempts1765152000000 implements MigrationInterface {
  name = 'AddOutboxAttempts1765152000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const sql of upStatements(queryRunner.connection.options.type)) await queryRunner.query(sql);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const type = queryRunner.connection.options.type;
    const mysql = type === 'mysql' || type === 'mariadb';
    const q = (name: string) => (mysql ? `\`${name}\`` : `"${name}"`);
    await queryRunner.query(`DROP TABLE ${q('outbox_attempts')}`);
    await queryRunner.query(
      mysql
        ? `DROP INDEX ${q('IDX_outbox_messages_dead')} ON ${q('outbox_messages')}`
        : `DROP INDEX ${q('IDX_outbox_messages_dead')}`,
    );
    await queryRunner.query(`ALTER TABLE ${q('outbox_messages')} DROP COLUMN ${q('dead_at')}`);
  }
}

function upStatements(type: string): string[] {
  switch (type) {
    case 'postgres':
      return [
        `ALTER TABLE "outbox_messages" ADD "dead_at" bigint NOT NULL DEFAULT '0'`,
        `UPDATE "outbox_messages" SET "dead_at" = "available_at" WHERE "status" = 'dead'`,
        `CREATE INDEX "IDX_outbox_messages_dead" ON "outbox_messages" ("status", "dead_at", "seq")`,
        `CREATE TABLE "outbox_attempts" ("id" BIGSERIAL NOT NULL, "message_seq" bigint NOT NULL, ` +
          `"attempt" integer NOT NULL, "failed_at" bigint NOT NULL, "counted" smallint NOT NULL, ` +
          `"error" text NOT NULL, ` +
          `"owner" character varying(36) NOT NULL, "publisher" character varying(255) NOT NULL, ` +
          `CONSTRAINT "PK_e35a1f86fb21f9c97644a01b1f1" PRIMARY KEY ("id"))`,
        `CREATE INDEX "IDX_outbox_attempts_message" ON "outbox_attempts" ("message_seq", "id")`,
        `ALTER TABLE "outbox_attempts" ADD CONSTRAINT "FK_outbox_attempts_message" FOREIGN KEY ("message_seq") ` +
          `REFERENCES "outbox_messages"("seq") ON DELETE CASCADE ON UPDATE NO ACTION`,
      ];
    case 'mysql':
    case 'mariadb':
      return [
        "ALTER TABLE `outbox_messages` ADD `dead_at` bigint NOT NULL DEFAULT '0'",
        "UPDATE `outbox_messages` SET `dead_at` = `available_at` WHERE `status` = 'dead'",
        'CREATE INDEX `IDX_outbox_messages_dead` ON `outbox_messages` (`status`, `dead_at`, `seq`)',
        'CREATE TABLE `outbox_attempts` (`id` bigint NOT NULL AUTO_INCREMENT, `message_seq` bigint NOT NULL, ' +
          '`attempt` int NOT NULL, `failed_at` bigint NOT NULL, `counted` smallint NOT NULL, `error` text NOT NULL, ' +
          '`owner` varchar(36) NOT NULL, `publisher` varchar(255) NOT NULL, ' +
          'INDEX `IDX_outbox_attempts_message` (`message_seq`, `id`), PRIMARY KEY (`id`)) ENGINE=InnoDB',
        'ALTER TABLE `outbox_attempts` ADD CONSTRAINT `FK_outbox_attempts_message` FOREIGN KEY (`message_seq`) ' +
          'REFERENCES `outbox_messages`(`seq`) ON DELETE CASCADE ON UPDATE NO ACTION',
      ];
    case 'better-sqlite3':
    case 'sqlite':
      return [
        `ALTER TABLE "outbox_messages" ADD COLUMN "dead_at" bigint NOT NULL DEFAULT (0)`,
        `UPDATE "outbox_messages" SET "dead_at" = "available_at" WHERE "status" = 'dead'`,
        `CREATE INDEX "IDX_outbox_messages_dead" ON "outbox_messages" ("status", "dead_at", "seq")`,
        `CREATE TABLE "outbox_attempts" ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, ` +
          `"message_seq" bigint NOT NULL, "attempt" integer NOT NULL, "failed_at" bigint NOT NULL, ` +
          `"counted" smallint NOT NULL, "error" text NOT NULL, "owner" varchar(36) NOT NULL, ` +
          `"publisher" varchar(255) NOT NULL, CONSTRAINT "FK_outbox_attempts_message" FOREIGN KEY ("message_seq") ` +
          `REFERENCES "outbox_messages" ("seq") ON DELETE CASCADE ON UPDATE NO ACTION)`,
        `CREATE INDEX "IDX_outbox_attempts_message" ON "outbox_attempts" ("message_seq", "id")`,
      ];
    default:
      throw new Error(
        `AddOutboxAttempts1765152000000 does not support the TypeORM driver '${type}'. ` +
          'Use PostgreSQL, MySQL/MariaDB or SQLite.',
      );
  }
}
