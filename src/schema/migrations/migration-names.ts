import type { MigrationInterface } from 'typeorm';
import {
  outboxIndexNames,
  outboxTableNames,
  type OutboxIndexNames,
  type OutboxTableNames,
} from '../outbox-table-names';

/** What one of the shipped migrations writes its SQL from: the quoted names of its table set on one database. */
export interface MigrationNames {
  /** MySQL/MariaDB (backticks, no schemas) rather than PostgreSQL/SQLite (double quotes). */
  mysql: boolean;
  /** Quotes one identifier (a column, an index or constraint name). */
  q(name: string): string;
  /** The quoted table paths (`"schema"."table"` when the set has a schema). */
  messages: string;
  attempts: string;
  keyLocks: string;
  idempotencyKeys: string;
  idempotencySteps: string;
  /** Index and constraint names, unquoted. */
  index: OutboxIndexNames;
  tables: OutboxTableNames;
}

/** The names the shipped migrations use when nothing else is configured. */
export const SHIPPED_TABLES = outboxTableNames();

/** The quoted names of `tables` for the TypeORM driver `type`. */
export function migrationNames(type: string, tables: OutboxTableNames): MigrationNames {
  const mysql = type === 'mysql' || type === 'mariadb';
  const q = (name: string) => (mysql ? `\`${name}\`` : `"${name}"`);
  const path = (table: string) => (tables.schema === undefined ? q(table) : `${q(tables.schema)}.${q(table)}`);
  return {
    mysql,
    q,
    messages: path(tables.messages),
    attempts: path(tables.attempts),
    keyLocks: path(tables.keyLocks),
    idempotencyKeys: path(tables.idempotencyKeys),
    idempotencySteps: path(tables.idempotencySteps),
    index: outboxIndexNames(tables),
    tables,
  };
}

/** `DROP INDEX` of an index of `table` (MySQL names the table; PostgreSQL finds the index in the table's schema). */
export function dropIndex(n: MigrationNames, index: string, table: string): string {
  if (n.mysql) return `DROP INDEX ${n.q(index)} ON ${table}`;
  return n.tables.schema === undefined
    ? `DROP INDEX ${n.q(index)}`
    : `DROP INDEX ${n.q(n.tables.schema)}.${n.q(index)}`;
}

/** A shipped migration class: its instances write the SQL of `tables` (the shipped names unless overridden). */
export interface TableSetMigration extends MigrationInterface {
  tables: OutboxTableNames;
}

/**
 * A subclass of the shipped migration `base` for the tables `tables`, named `<Base>_<prefix><timestamp>`, or
 * `<Base>_<schema>.<prefix><timestamp>` with a schema — e.g. `CreateOutboxTables_billing_1764374400000`. TypeORM
 * orders migrations by the 13-digit timestamp at the end of the name, and records the name as run: each outbox's
 * migrations are recorded apart.
 */
export function migrationForTables<T extends new () => TableSetMigration>(base: T, tables: OutboxTableNames): T {
  // A shipped migration that ignored `tables` would write the shipped tables for every outbox.
  if (!('tables' in new base())) {
    throw new Error(`${base.name} does not take table names (a \`tables\` field read by up() and down()).`);
  }
  const baseName = base.name;
  const timestamp = baseName.slice(-13);
  const tag = tables.schema === undefined ? tables.prefix : `${tables.schema}.${tables.prefix}`;
  const name = `${baseName.slice(0, -13)}_${tag}${timestamp}`;
  const subclass = class extends (base as new () => TableSetMigration) {
    constructor() {
      super();
      this.name = name;
      this.tables = tables;
    }
  } as unknown as T;
  Object.defineProperty(subclass, 'name', { value: name });
  return subclass;
}
