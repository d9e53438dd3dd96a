import type { MigrationInterface, QueryRunner } from 'typeorm';
import type { OutboxTableNames } from '../outbox-table-names';
import { dropIndex, migrationNames, SHIPPED_TABLES, type MigrationNames } from './migration-names';

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
 * (`outboxMigrations({ prefix, schema })` gives it for other table names.)
 *
 * ```ts
 * TypeOrmModule.forRoot({ …, migrations: [CreateOutboxTables1764374400000, AddOutboxAttempts1765152000000] })
 * ```
 */
export class AddOutboxAttempts1765152000000 implements MigrationInterface {
  name = 'AddOutboxAttempts1765152000000';
  /** The table set it changes (the shipped names; `outboxMigrations()` sets others). */
  tables: OutboxTableNames = SHIPPED_TABLES;

  async up(queryRunner: QueryRunner): Promise<void> {
    const type = queryRunner.connection.options.type;
    for (const sql of upStatements(type, migrationNames(type, this.tables))) await queryRunner.query(sql);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const n = migrationNames(queryRunner.connection.options.type, this.tables);
    await queryRunner.query(`DROP TABLE ${n.attempts}`);
    await queryRunner.query(dropIndex(n, n.index.messages.dead, n.messages));
    await queryRunner.query(`ALTER TABLE ${n.messages} DROP COLUMN ${n.q('dead_at')}`);
  }
}

function upStatements(type: string, n: MigrationNames): string[] {
  const { q, messages: t, attempts: a } = n;
  const dead = q(n.index.messages.dead);
  const { primaryKey, message: byMessage, messageForeignKey: fk } = n.index.attempts;
  switch (type) {
    case 'postgres':
      return [
        `ALTER TABLE ${t} ADD "dead_at" bigint NOT NULL DEFAULT '0'`,
        `UPDATE ${t} SET "dead_at" = "available_at" WHERE "status" = 'dead'`,
        `CREATE INDEX ${dead} ON ${t} ("status", "dead_at", "seq")`,
        `CREATE TABLE ${a} ("id" BIGSERIAL NOT NULL, "message_seq" bigint NOT NULL, ` +
          `"attempt" integer NOT NULL, "failed_at" bigint NOT NULL, "counted" smallint NOT NULL, ` +
          `"error" text NOT NULL, ` +
          `"owner" character varying(36) NOT NULL, "publisher" character varying(255) NOT NULL, ` +
          `CONSTRAINT ${q(primaryKey)} PRIMARY KEY ("id"))`,
        `CREATE INDEX ${q(byMessage)} ON ${a} ("message_seq", "id")`,
        `ALTER TABLE ${a} ADD CONSTRAINT ${q(fk)} FOREIGN KEY ("message_seq") ` +
          `REFERENCES ${t}("seq") ON DELETE CASCADE ON UPDATE NO ACTION`,
      ];
    case 'mysql':
    case 'mariadb':
      return [
        `ALTER TABLE ${t} ADD \`dead_at\` bigint NOT NULL DEFAULT '0'`,
        `UPDATE ${t} SET \`dead_at\` = \`available_at\` WHERE \`status\` = 'dead'`,
        `CREATE INDEX ${dead} ON ${t} (\`status\`, \`dead_at\`, \`seq\`)`,
        `CREATE TABLE ${a} (\`id\` bigint NOT NULL AUTO_INCREMENT, \`message_seq\` bigint NOT NULL, ` +
          '`attempt` int NOT NULL, `failed_at` bigint NOT NULL, `counted` smallint NOT NULL, `error` text NOT NULL, ' +
          '`owner` varchar(36) NOT NULL, `publisher` varchar(255) NOT NULL, ' +
          `INDEX ${q(byMessage)} (\`message_seq\`, \`id\`), PRIMARY KEY (\`id\`)) ENGINE=InnoDB`,
        `ALTER TABLE ${a} ADD CONSTRAINT ${q(fk)} FOREIGN KEY (\`message_seq\`) ` +
          `REFERENCES ${t}(\`seq\`) ON DELETE CASCADE ON UPDATE NO ACTION`,
      ];
    case 'better-sqlite3':
    case 'sqlite':
      return [
        `ALTER TABLE ${t} ADD COLUMN "dead_at" bigint NOT NULL DEFAULT (0)`,
        `UPDATE ${t} SET "dead_at" = "available_at" WHERE "status" = 'dead'`,
        `CREATE INDEX ${dead} ON ${t} ("status", "dead_at", "seq")`,
        `CREATE TABLE ${a} ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, ` +
          `"message_seq" bigint NOT NULL, "attempt" integer NOT NULL, "failed_at" bigint NOT NULL, ` +
          `"counted" smallint NOT NULL, "error" text NOT NULL, "owner" varchar(36) NOT NULL, ` +
          `"publisher" varchar(255) NOT NULL, CONSTRAINT ${q(fk)} FOREIGN KEY ("message_seq") ` +
          `REFERENCES ${t} ("seq") ON DELETE CASCADE ON UPDATE NO ACTION)`,
        `CREATE INDEX ${q(byMessage)} ON ${a} ("message_seq", "id")`,
      ];
    default:
      throw new Error(
        `AddOutboxAttempts1765152000000 does not support the TypeORM driver '${type}'. ` +
          'Use PostgreSQL, MySQL/MariaDB or SQLite.',
      );
  }
}
