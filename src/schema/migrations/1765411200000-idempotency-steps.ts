import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Creates `idempotency_steps`, the table of `IdempotencyStep` (the recorded results of `idempotentStep()`), on
 * PostgreSQL, MySQL/MariaDB or SQLite (picked from the connection). Times are epoch milliseconds (BIGINT). It makes
 * exactly the entity's schema (`synchronize` finds nothing to change): on MySQL/MariaDB `result` is TEXT, 64 KB.
 *
 * Run it after `CreateIdempotencyKeys1764460800000`; it changes nothing that migration made.
 *
 * ```ts
 * TypeOrmModule.forRoot({ …, migrations: [...OUTBOX_MIGRATIONS], migrationsRun: true })
 * ```
 */
export class CreateIdempotencySteps1765411200000 implements MigrationInterface {
  name = 'CreateIdempotencySteps1765411200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const sql of createStatements(queryRunner.connection.options.type)) await queryRunner.query(sql);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const type = queryRunner.connection.options.type;
    const q = type === 'mysql' || type === 'mariadb' ? '`' : '"';
    await queryRunner.query(`DROP TABLE ${q}idempotency_steps${q}`);
  }
}

function createStatements(type: string): string[] {
  switch (type) {
    case 'postgres':
      return [
        `CREATE TABLE "idempotency_steps" ("id" BIGSERIAL NOT NULL, "scope" character varying(255) NOT NULL, ` +
          `"idempotency_key" character varying(255) NOT NULL, "step" character varying(100) NOT NULL, ` +
          `"fingerprint" character varying(64) NOT NULL, "result" text, "created_at" bigint NOT NULL, ` +
          `"expires_at" bigint NOT NULL, CONSTRAINT "UQ_idempotency_steps_scope_key_step" UNIQUE ("scope", ` +
          `"idempotency_key", "step"), CONSTRAINT "PK_idempotency_steps" PRIMARY KEY ("id"))`,
        `CREATE INDEX "IDX_idempotency_steps_expires_at" ON "idempotency_steps" ("expires_at")`,
      ];
    case 'mysql':
    case 'mariadb':
      return [
        'CREATE TABLE `idempotency_steps` (`id` bigint NOT NULL AUTO_INCREMENT, `scope` varchar(255) NOT NULL, ' +
          '`idempotency_key` varchar(255) NOT NULL, `step` varchar(100) NOT NULL, `fingerprint` varchar(64) NOT NULL, ' +
          '`result` text NULL, `created_at` bigint NOT NULL, `expires_at` bigint NOT NULL, ' +
          'UNIQUE INDEX `UQ_idempotency_steps_scope_key_step` (`scope`, `idempotency_key`, `step`), ' +
          'INDEX `IDX_idempotency_steps_expires_at` (`expires_at`), PRIMARY KEY (`id`)) ENGINE=InnoDB',
      ];
    case 'better-sqlite3':
    case 'sqlite':
      return [
        `CREATE TABLE "idempotency_steps" ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, ` +
          `"scope" varchar(255) NOT NULL, "idempotency_key" varchar(255) NOT NULL, "step" varchar(100) NOT NULL, ` +
          `"fingerprint" varchar(64) NOT NULL, "result" text, "created_at" bigint NOT NULL, ` +
          `"expires_at" bigint NOT NULL, ` +
          `CONSTRAINT "UQ_idempotency_steps_scope_key_step" UNIQUE ("scope", "idempotency_key", "step"))`,
        `CREATE INDEX "IDX_idempotency_steps_expires_at" ON "idempotency_steps" ("expires_at")`,
      ];
    default:
      throw new Error(
        `CreateIdempotencySteps1765411200000 does not support the TypeORM driver '${type}'. ` +
          'Use PostgreSQL, MySQL/MariaDB or SQLite.',
      );
  }
}
