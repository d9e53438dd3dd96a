import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Creates `idempotency_keys`, the table of `IdempotencyRecord`, on PostgreSQL, MySQL/MariaDB or SQLite (picked from
 * the connection). Times are epoch milliseconds (BIGINT). On MySQL/MariaDB `response_body` is MEDIUMTEXT (16 MB)
 * rather than the entity's TEXT (64 KB there).
 *
 * ```ts
 * TypeOrmModule.forRoot({ …, migrations: [CreateIdempotencyKeys1764460800000], migrationsRun: true })
 * ```
 */
export class CreateIdempotencyKeys1764460800000 implements MigrationInterface {
  name = 'CreateIdempotencyKeys1764460800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const sql of createStatements(queryRunner.connection.options.type)) await queryRunner.query(sql);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const type = queryRunner.connection.options.type;
    const q = type === 'mysql' || type === 'mariadb' ? '`' : '"';
    await queryRunner.query(`DROP TABLE ${q}idempotency_keys${q}`);
  }
}

function createStatements(type: string): string[] {
  switch (type) {
    case 'postgres':
      return [
        `CREATE TABLE "idempotency_keys" ("id" BIGSERIAL NOT NULL, "scope" character varying(255) NOT NULL, ` +
          `"idempotency_key" character varying(255) NOT NULL, "fingerprint" character varying(64) NOT NULL, ` +
          `"response_status" integer, "response_body" text, "response_headers" text, "created_at" bigint NOT NULL, ` +
          `"expires_at" bigint NOT NULL, CONSTRAINT "UQ_idempotency_keys_scope_key" UNIQUE ("scope", ` +
          `"idempotency_key"), CONSTRAINT "PK_idempotency_keys" PRIMARY KEY ("id"))`,
        `CREATE INDEX "IDX_idempotency_keys_expires_at" ON "idempotency_keys" ("expires_at")`,
      ];
    case 'mysql':
    case 'mariadb':
      return [
        'CREATE TABLE `idempotency_keys` (`id` bigint NOT NULL AUTO_INCREMENT, `scope` varchar(255) NOT NULL, ' +
          '`idempotency_key` varchar(255) NOT NULL, `fingerprint` varchar(64) NOT NULL, `response_status` int NULL, ' +
          '`response_body` mediumtext NULL, `response_headers` text NULL, `created_at` bigint NOT NULL, ' +
          '`expires_at` bigint NOT NULL, UNIQUE INDEX `UQ_idempotency_keys_scope_key` (`scope`, `idempotency_key`), ' +
          'INDEX `IDX_idempotency_keys_expires_at` (`expires_at`), PRIMARY KEY (`id`)) ENGINE=InnoDB',
      ];
    case 'better-sqlite3':
    case 'sqlite':
      return [
        `CREATE TABLE "idempotency_keys" ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, ` +
          `"scope" varchar(255) NOT NULL, "idempotency_key" varchar(255) NOT NULL, ` +
          `"fingerprint" varchar(64) NOT NULL, "response_status" integer, "response_body" text, ` +
          `"response_headers" text, "created_at" bigint NOT NULL, "expires_at" bigint NOT NULL, ` +
          `CONSTRAINT "UQ_idempotency_keys_scope_key" UNIQUE ("scope", "idempotency_key"))`,
        `CREATE INDEX "IDX_idempotency_keys_expires_at" ON "idempotency_keys" ("expires_at")`,
      ];
    default:
      throw new Error(
        `CreateIdempotencyKeys1764460800000 does not support the TypeORM driver '${type}'. ` +
          'Use PostgreSQL, MySQL/MariaDB or SQLite.',
      );
  }
}
