import type { MigrationInterface, QueryRunner } from 'typeorm';
import type { OutboxTableNames } from '../outbox-table-names';
import { dropIndex, migrationNames, SHIPPED_TABLES, type MigrationNames } from './migration-names';

/**
 * On PostgreSQL, the expiry index of `idempotency_keys` (`IDX_idempotency_keys_expires_at`) becomes a BRIN index
 * (`pages_per_range = 32`, `autosummarize = on`) under the same name; MySQL/MariaDB and SQLite are left as they are.
 *
 * Why: every `@Idempotent()` call inserts one row, and its expiry only ever grows, so all concurrent inserts land on
 * the last leaf page of a B-tree on `expires_at` and wait for one another. A BRIN index costs an insert next to
 * nothing (the newest block range is summarized once it is full), and the scheduled cleanup still finds expired
 * rows by block range. Measured on the bench (`docs/performance.md`): about 10 % more requests per second.
 *
 * The trade-off: BRIN relies on rows being written roughly in expiry order, which holds while routes share one TTL
 * (the module's `idempotency.ttl`). An app whose routes use TTLs that differ by orders of magnitude keeps more
 * block ranges in play and its cleanup reads more of the table per batch; such an app can put a B-tree back with a
 * migration of its own (`CREATE INDEX … ("expires_at")`), as `down()` does.
 *
 * It rebuilds the index in the migration's transaction: writes to the table wait for one sequential scan of it.
 *
 * Run it after `CreateIdempotencySteps1765411200000` (`migrations: [...OUTBOX_MIGRATIONS]` lists it).
 * (`outboxMigrations({ prefix, schema })` gives it for other table names.)
 */
export class IdempotencyExpiryBrin1765584000000 implements MigrationInterface {
  name = 'IdempotencyExpiryBrin1765584000000';
  /** The table set it changes (the shipped names; `outboxMigrations()` sets others). */
  tables: OutboxTableNames = SHIPPED_TABLES;

  up(queryRunner: QueryRunner): Promise<void> {
    return rebuildExpiryIndex(queryRunner, this.tables, 'brin');
  }

  /** Back to the B-tree of `CreateIdempotencyKeys1764460800000`. */
  down(queryRunner: QueryRunner): Promise<void> {
    return rebuildExpiryIndex(queryRunner, this.tables, 'btree');
  }
}

/** On PostgreSQL (else nothing), drops the expiry index of `idempotency_keys` and makes it again with `method`. */
async function rebuildExpiryIndex(
  queryRunner: QueryRunner,
  tables: OutboxTableNames,
  method: 'brin' | 'btree',
): Promise<void> {
  const type = queryRunner.connection.options.type;
  if (type !== 'postgres') return;
  for (const sql of indexStatements(migrationNames(type, tables), method)) await queryRunner.query(sql);
}

/** Drops the expiry index of `idempotency_keys` and creates it again, same name, with `method`. */
function indexStatements(n: MigrationNames, method: 'brin' | 'btree'): string[] {
  const { q, idempotencyKeys: t } = n;
  const index = n.index.idempotencyKeys.expiresAt;
  const how =
    method === 'brin'
      ? ` USING brin (${q('expires_at')}) WITH (pages_per_range = 32, autosummarize = on)`
      : ` (${q('expires_at')})`;
  return [dropIndex(n, index, t), `CREATE INDEX ${q(index)} ON ${t}${how}`];
}
