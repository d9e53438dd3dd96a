import type { MigrationInterface, QueryRunner } from 'typeorm';
import type { OutboxTableNames } from '../outbox-table-names';
import { migrationNames, SHIPPED_TABLES, type MigrationNames } from './migration-names';

/**
 * Creates `idempotency_keys`, the table of `IdempotencyRecord`, on PostgreSQL, MySQL/MariaDB or SQLite (picked from
 * the connection). Times are epoch milliseconds (BIGINT). On MySQL/MariaDB `response_body` is MEDIUMTEXT (16 MB)
 * rather than the entity's TEXT (64 KB there). (`outboxMigrations({ prefix, schema })` gives it for other names.)
 *
 * ```ts
 * TypeOrmModule.forRoot({ …, migrations: [CreateIdempotencyKeys1764460800000], migrationsRun: true })
 * ```
 */
export class CreateIdempotencyKeys1764460800000 implements MigrationInterface {
  name = 'CreateIdempotencyKeys1764460800000';
  /** The table set it creates (the shipped names; `outboxMigrations()` sets others). */
  tables: OutboxTableNames = SHIPPED_TABLES;

  async up(queryRunner: QueryRunner): Promise<void> {
    const type = queryRunner.connection.options.type;
    for (const sql of createStatements(type, migrationNames(type, this.tables))) await queryRunner.query(sql);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const n = migrationNames(queryRunner.connection.options.type, this.tables);
    await queryRunner.query(`DROP TABLE ${n.idempotencyKeys}`);
  }
}

function createStatements(type: string, n: MigrationNames): string[] {
  const { q, idempotencyKeys: t } = n;
  const i = n.index.idempotencyKeys;
  switch (type) {
    case 'postgres':
      return [
        `CREATE TABLE ${t} ("id" BIGSERIAL NOT NULL, "scope" character varying(255) NOT NULL, ` +
          `"idempotency_key" character varying(255) NOT NULL, "fingerprint" character varying(64) NOT NULL, ` +
          `"response_status" integer, "response_body" text, "response_headers" text, "created_at" bigint NOT NULL, ` +
          `"expires_at" bigint NOT NULL, CONSTRAINT ${q(i.scopeKeyUnique)} UNIQUE ("scope", ` +
          `"idempotency_key"), CONSTRAINT ${q(i.primaryKey)} PRIMARY KEY ("id"))`,
        `CREATE INDEX ${q(i.expiresAt)} ON ${t} ("expires_at")`,
      ];
    case 'mysql':
    case 'mariadb':
      return [
        `CREATE TABLE ${t} (\`id\` bigint NOT NULL AUTO_INCREMENT, \`scope\` varchar(255) NOT NULL, ` +
          '`idempotency_key` varchar(255) NOT NULL, `fingerprint` varchar(64) NOT NULL, `response_status` int NULL, ' +
          '`response_body` mediumtext NULL, `response_headers` text NULL, `created_at` bigint NOT NULL, ' +
          `\`expires_at\` bigint NOT NULL, UNIQUE INDEX ${q(i.scopeKeyUnique)} (\`scope\`, \`idempotency_key\`), ` +
          `INDEX ${q(i.expiresAt)} (\`expires_at\`), PRIMARY KEY (\`id\`)) ENGINE=InnoDB`,
      ];
    case 'better-sqlite3':
    case 'sqlite':
      return [
        `CREATE TABLE ${t} ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, ` +
          `"scope" varchar(255) NOT NULL, "idempotency_key" varchar(255) NOT NULL, ` +
          `"fingerprint" varchar(64) NOT NULL, "response_status" integer, "response_body" text, ` +
          `"response_headers" text, "created_at" bigint NOT NULL, "expires_at" bigint NOT NULL, ` +
          `CONSTRAINT ${q(i.scopeKeyUnique)} UNIQUE ("scope", "idempotency_key"))`,
        `CREATE INDEX ${q(i.expiresAt)} ON ${t} ("expires_at")`,
      ];
    default:
      throw new Error(
        `CreateIdempotencyKeys1764460800000 does not support the TypeORM driver '${type}'. ` +
          'Use PostgreSQL, MySQL/MariaDB or SQLite.',
      );
  }
}
