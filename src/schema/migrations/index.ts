import { CreateOutboxTables1764374400000 } from './1764374400000-outbox-tables';
import { CreateIdempotencyKeys1764460800000 } from './1764460800000-idempotency-keys';
import { AddOutboxAttempts1765152000000 } from './1765152000000-outbox-attempts';
import { CreateIdempotencySteps1765411200000 } from './1765411200000-idempotency-steps';
import { AddOutboxDestinations1765497600000 } from './1765497600000-outbox-destinations';
import { IdempotencyExpiryBrin1765584000000 } from './1765584000000-idempotency-expiry-brin';
import { AddOutboxExpiry1765670400000 } from './1765670400000-outbox-expiry';
import { AddOutboxCause1765756800000 } from './1765756800000-outbox-cause';
import { AddOutboxEditAudit1765843200000 } from './1765843200000-outbox-edit-audit';
import { migrationForTables } from './migration-names';
import { outboxTableNames, type OutboxTableNames, type OutboxTablesOptions } from '../outbox-table-names';

/**
 * Every migration the library ships, oldest first: `migrations: [...OUTBOX_MIGRATIONS, ...yours]`. A new release
 * that adds a migration adds it here, so an app that lists this array runs it without changing its configuration
 * (the startup schema check names any migration still missing). They create the shipped table names; for an
 * outbox with `tables` of its own, list `outboxMigrations(tables)` instead.
 */
export const OUTBOX_MIGRATIONS = [
  CreateOutboxTables1764374400000,
  CreateIdempotencyKeys1764460800000,
  AddOutboxAttempts1765152000000,
  CreateIdempotencySteps1765411200000,
  AddOutboxDestinations1765497600000,
  IdempotencyExpiryBrin1765584000000,
  AddOutboxExpiry1765670400000,
  AddOutboxCause1765756800000,
  AddOutboxEditAudit1765843200000,
] as const;

/** One set of migrations per table names, so that asking twice gives the same classes. */
const sets = new Map<string, readonly (typeof OUTBOX_MIGRATIONS)[number][]>();

/** The shipped migrations for the table set `tables` (the shipped classes themselves for the shipped names). */
export function migrationsForTables(tables: OutboxTableNames): readonly (typeof OUTBOX_MIGRATIONS)[number][] {
  if (tables.prefix === '' && tables.schema === undefined) return OUTBOX_MIGRATIONS;
  const key = `${tables.schema ?? ''}.${tables.prefix}`;
  let set = sets.get(key);
  if (!set) {
    set = OUTBOX_MIGRATIONS.map((migration) => migrationForTables(migration, tables));
    sets.set(key, set);
  }
  return set;
}

/**
 * The shipped migrations (all of `OUTBOX_MIGRATIONS`, oldest first) for an outbox's own table names: the same
 * schema as `outboxEntities(options)`, under names taken from `options` (with a `schema`, the first one creates
 * the schema on PostgreSQL when it is missing). Each class is named after the shipped one and the options —
 * `CreateOutboxTables_billing_1764374400000` for `{ prefix: 'billing_' }`,
 * `CreateOutboxTables_billing.1764374400000` for `{ schema: 'billing' }` — so TypeORM records each outbox's
 * migrations apart and orders them by their timestamp. Without options: `OUTBOX_MIGRATIONS` itself.
 *
 * ```ts
 * TypeOrmModule.forRoot({ …, migrations: [...OUTBOX_MIGRATIONS, ...outboxMigrations({ prefix: 'billing_' })] })
 * ```
 */
export function outboxMigrations(options: OutboxTablesOptions = {}): readonly (typeof OUTBOX_MIGRATIONS)[number][] {
  return migrationsForTables(outboxTableNames(options));
}
