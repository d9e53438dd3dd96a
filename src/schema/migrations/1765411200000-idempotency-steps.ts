import type { MigrationInterface, QueryRunner } from 'typeorm';
import type { OutboxTableNames } from '../outbox-table-names';
import { migrationNames, SHIPPED_TABLES, type MigrationNames } from './migration-names';

/**
 * Creates `idempotency_steps`, the table of `IdempotencyStep` (the recorded results of `idempotentStep()`), on
 * PostgreSQL, MySQL/MariaDB or SQLite (picked from the connection). Times are epoch milliseconds (BIGINT). It makes
 * exactly the entity's schema (`synchronize` finds nothing to change): on MySQL/MariaDB `result` is TEXT, 64 KB.
 * (`outboxMigrations({ prefix, schema })` gives it for other table names.)
 *
 * Run it after `CreateIdempotencyKeys1764460800000`; it changes nothing that migration made.
 *
 * ```ts
 * TypeOrmModule.forRoot({ …, migrations: [...OUTBOX_MIGRATIONS], migrationsRun: true })
 * ```
 */
export class CreateIdempotencySteps1765411200000 implements MigrationInterface {
  name = 'CreateIdempotencySteps1765411200000';
  /** The table set it creates (the shipped names; `outboxMigrations()` sets others). */
  tables: OutboxTableNames = SHIPPED_TABLES;

  async up(queryRunner: QueryRunner): Promise<void> {
    const type = queryRunner.connection.options.type;
    for (const sql of createStatements(type, migrationNames(type, this.tables))) await queryRunner.query(sql);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const n = migrationNames(queryRunner.connection.options.type, this.tables);
    await queryRunner.query(`DROP TABLE ${n.idempotencySteps}`);
  }
}

function createStatements(type: string, n: MigrationNames): string[] {
  const { q, idempotencySteps: t } = n;
  const i = n.index.idempotencySteps;
  switch (type) {
    case 'postgres':
      return [
        `CREATE TABLE ${t} ("id" BIGSERIAL NOT NULL, "scope" character varying(255) NOT NULL, ` +
          `"idempotency_key" character varying(255) NOT NULL, "step" character varying(100) NOT NULL, ` +
          `"fingerprint" character varying(64) NOT NULL, "result" text, "created_at" bigint NOT NULL, ` +
          `"expires_at" bigint NOT NULL, CONSTRAINT ${q(i.scopeKeyStepUnique)} UNIQUE ("scope", ` +
          `"idempotency_key", "step"), CONSTRAINT ${q(i.primaryKey)} PRIMARY KEY ("id"))`,
        `CREATE INDEX ${q(i.expiresAt)} ON ${t} ("expires_at")`,
      ];
    case 'mysql':
    case 'mariadb':
      return [
        `CREATE TABLE ${t} (\`id\` bigint NOT NULL AUTO_INCREMENT, \`scope\` varchar(255) NOT NULL, ` +
          '`idempotency_key` varchar(255) NOT NULL, `step` varchar(100) NOT NULL, `fingerprint` varchar(64) NOT NULL, ' +
          '`result` text NULL, `created_at` bigint NOT NULL, `expires_at` bigint NOT NULL, ' +
          `UNIQUE INDEX ${q(i.scopeKeyStepUnique)} (\`scope\`, \`idempotency_key\`, \`step\`), ` +
          `INDEX ${q(i.expiresAt)} (\`expires_at\`), PRIMARY KEY (\`id\`)) ENGINE=InnoDB`,
      ];
    case 'better-sqlite3':
    case 'sqlite':
      return [
        `CREATE TABLE ${t} ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, ` +
          `"scope" varchar(255) NOT NULL, "idempotency_key" varchar(255) NOT NULL, "step" varchar(100) NOT NULL, ` +
          `"fingerprint" varchar(64) NOT NULL, "result" text, "created_at" bigint NOT NULL, ` +
          `"expires_at" bigint NOT NULL, ` +
          `CONSTRAINT ${q(i.scopeKeyStepUnique)} UNIQUE ("scope", "idempotency_key", "step"))`,
        `CREATE INDEX ${q(i.expiresAt)} ON ${t} ("expires_at")`,
      ];
    default:
      throw new Error(
        `CreateIdempotencySteps1765411200000 does not support the TypeORM driver '${type}'. ` +
          'Use PostgreSQL, MySQL/MariaDB or SQLite.',
      );
  }
}
