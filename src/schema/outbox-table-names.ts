import { DefaultNamingStrategy } from 'typeorm';
import { OutboxConfigurationError } from '../errors';
import type { OutboxTablesOptions } from './outbox-tables.options';

export type { OutboxTablesOptions } from './outbox-tables.options';

/** The names of one outbox's tables (without schema) and their schema. */
export interface OutboxTableNames {
  readonly prefix: string;
  readonly schema?: string;
  /** `OutboxMessage`'s table. */
  readonly messages: string;
  /** `OutboxAttempt`'s table. */
  readonly attempts: string;
  /** `OutboxKeyLock`'s table (MySQL/MariaDB). */
  readonly keyLocks: string;
  /** `IdempotencyRecord`'s table. */
  readonly idempotencyKeys: string;
  /** `IdempotencyStep`'s table. */
  readonly idempotencySteps: string;
}

/** The shipped table names, before any prefix. */
export const OUTBOX_TABLE_BASE_NAMES = Object.freeze({
  messages: 'outbox_messages',
  attempts: 'outbox_attempts',
  keyLocks: 'outbox_key_locks',
  idempotencyKeys: 'idempotency_keys',
  idempotencySteps: 'idempotency_steps',
});

/** Letters, digits and `_`, not starting with a digit: valid unquoted on every supported database. */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The table names of `options` (checked: a bad prefix or schema throws `OutboxConfigurationError`). */
export function outboxTableNames(options: OutboxTablesOptions = {}): OutboxTableNames {
  const { prefix = '', schema } = checkTablesOptions(options);
  const b = OUTBOX_TABLE_BASE_NAMES;
  return Object.freeze({
    prefix,
    ...(schema === undefined ? {} : { schema }),
    messages: prefix + b.messages,
    attempts: prefix + b.attempts,
    keyLocks: prefix + b.keyLocks,
    idempotencyKeys: prefix + b.idempotencyKeys,
    idempotencySteps: prefix + b.idempotencySteps,
  });
}

/** `@Entity()` options of one table of a set: its name, and its schema when one is set. */
export function tableEntityOptions(
  tables: OutboxTableNames,
  which: keyof typeof OUTBOX_TABLE_BASE_NAMES,
): { name: string; schema?: string } {
  return { name: tables[which], ...(tables.schema === undefined ? {} : { schema: tables.schema }) };
}

const naming = new DefaultNamingStrategy();

/**
 * The one place index and constraint names come from: `<kind>_<table>_<what>` (and TypeORM's default primary key
 * names for the outbox tables), so that the shipped names stay what they always were and every prefixed set gets
 * names of its own. Used by the entities (`outboxEntities()`), the migrations (`outboxMigrations()`) and the code
 * that recognizes an index by name, alike. Each takes a table name without schema.
 */
export const indexNamesOf = {
  messages: (m: string) => ({
    primaryKey: naming.primaryKeyName(m, ['seq']),
    /** Unique on `(message_id, destination)` (since `AddOutboxDestinations1765497600000`). */
    messageIdUnique: `UQ_${m}_message_destination`,
    /** Unique on `message_id` alone, made by `CreateOutboxTables1764374400000` and dropped by the destinations' migration. */
    legacyMessageIdUnique: `UQ_${m}_message_id`,
    claim: `IDX_${m}_claim`,
    /** `(ordering_key, status, destination, seq)`: per-key order per destination. */
    key: `IDX_${m}_key_destination`,
    /** `(ordering_key, status, seq)`, made by the first migration and replaced by `key`. */
    legacyKey: `IDX_${m}_key`,
    cleanup: `IDX_${m}_cleanup`,
    dead: `IDX_${m}_dead`,
    /** `(cause_key)`: the messages one call emitted, for `OutboxService.trace()` (since `AddOutboxCause1765756800000`). */
    cause: `IDX_${m}_cause`,
  }),
  attempts: (a: string) => ({
    primaryKey: naming.primaryKeyName(a, ['id']),
    message: `IDX_${a}_message`,
    messageForeignKey: `FK_${a}_message`,
  }),
  keyLocks: (k: string) => ({ primaryKey: naming.primaryKeyName(k, ['bucket']) }),
  idempotencyKeys: (t: string) => ({
    primaryKey: `PK_${t}`,
    scopeKeyUnique: `UQ_${t}_scope_key`,
    expiresAt: `IDX_${t}_expires_at`,
  }),
  idempotencySteps: (t: string) => ({
    primaryKey: `PK_${t}`,
    scopeKeyStepUnique: `UQ_${t}_scope_key_step`,
    expiresAt: `IDX_${t}_expires_at`,
  }),
};

/** The names of every index, unique and foreign key constraint and primary key of a table set. */
export type OutboxIndexNames = { [K in keyof typeof indexNamesOf]: ReturnType<(typeof indexNamesOf)[K]> };

/** The index and constraint names of the tables `tables` (see `indexNamesOf`). */
export function outboxIndexNames(tables: OutboxTableNames): OutboxIndexNames {
  return {
    messages: indexNamesOf.messages(tables.messages),
    attempts: indexNamesOf.attempts(tables.attempts),
    keyLocks: indexNamesOf.keyLocks(tables.keyLocks),
    idempotencyKeys: indexNamesOf.idempotencyKeys(tables.idempotencyKeys),
    idempotencySteps: indexNamesOf.idempotencySteps(tables.idempotencySteps),
  };
}

/** The table name of a table path (`schema.table` → `table`). */
export function tableNameOf(tablePath: string): string {
  return tablePath.split('.').pop()!;
}

/** Longest identifier (table, index, constraint, schema) per database: PostgreSQL 63 bytes, MySQL/MariaDB 64. */
const MAX_IDENTIFIER_LENGTH: Record<string, number> = { postgres: 63, mysql: 64, mariadb: 64 };

/**
 * Checks the names of a table set against the database of `driverType`: every table, index and constraint name
 * within its length limit, and `schema` only where it is supported (PostgreSQL). Throws `OutboxConfigurationError`.
 */
export function checkTableNamesFor(tables: OutboxTableNames, driverType: string, where: string): void {
  if (tables.schema !== undefined && driverType !== 'postgres') {
    throw new OutboxConfigurationError(
      `${where}: tables.schema ('${tables.schema}') is supported on PostgreSQL only, but the DataSource is ` +
        `'${driverType}'. Use tables: { prefix: '${tables.schema}_' } to keep this outbox's tables apart instead.`,
    );
  }
  const max = MAX_IDENTIFIER_LENGTH[driverType];
  if (max === undefined) return;
  const indexes = outboxIndexNames(tables);
  const names = [
    ...(tables.schema === undefined ? [] : [tables.schema]),
    ...Object.values(OUTBOX_TABLE_BASE_NAMES).map((b) => tables.prefix + b),
    ...Object.values(indexes).flatMap((set) => Object.values(set) as string[]),
  ];
  const tooLong = names.filter((n) => Buffer.byteLength(n, 'utf8') > max);
  if (tooLong.length > 0) {
    const longest = Math.max(...tooLong.map((n) => n.length));
    throw new OutboxConfigurationError(
      `${where}: tables.prefix '${tables.prefix}' makes names longer than ${driverType} allows (${max} bytes): ` +
        `${tooLong.join(', ')}. Shorten the prefix by at least ${longest - max} characters.`,
    );
  }
}

function checkTablesOptions(options: OutboxTablesOptions): OutboxTablesOptions {
  if (options === null || typeof options !== 'object') {
    throw new OutboxConfigurationError(
      `tables must be an object like { prefix: 'billing_' } or { schema: 'billing' }, got ${String(options)}.`,
    );
  }
  const unknown = Object.keys(options).filter((k) => k !== 'prefix' && k !== 'schema');
  if (unknown.length > 0) {
    throw new OutboxConfigurationError(
      `tables has unknown option${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}: it takes prefix and schema.`,
    );
  }
  const { prefix, schema } = options;
  if (prefix !== undefined && (typeof prefix !== 'string' || (prefix !== '' && !IDENTIFIER.test(prefix)))) {
    throw new OutboxConfigurationError(
      `tables.prefix must be letters, digits and _ (not starting with a digit), like 'billing_'; ` +
        `got ${JSON.stringify(prefix)}.`,
    );
  }
  if (schema !== undefined && (typeof schema !== 'string' || !IDENTIFIER.test(schema))) {
    throw new OutboxConfigurationError(
      `tables.schema must be a schema name of letters, digits and _ (not starting with a digit), like 'billing'; ` +
        `got ${JSON.stringify(schema)}.`,
    );
  }
  return options;
}

/**
 * The tables that belong with the outbox table `outboxTable` (a table path, `[schema.]<prefix>outbox_messages`):
 * the same schema and prefix. A table named otherwise (a custom naming strategy) keeps the shipped companions.
 */
export function companionTablePath(outboxTable: string, which: 'attempts' | 'keyLocks'): string {
  const parts = outboxTable.split('.');
  const last = parts[parts.length - 1];
  const base = OUTBOX_TABLE_BASE_NAMES.messages;
  const prefix = last.endsWith(base) ? last.slice(0, -base.length) : '';
  parts[parts.length - 1] = prefix + OUTBOX_TABLE_BASE_NAMES[which];
  return parts.join('.');
}

/** A readable form of the options for messages: `{ prefix: 'billing_' }`. */
export function describeTablesOptions(tables: OutboxTableNames): string {
  const parts = [
    ...(tables.prefix ? [`prefix: '${tables.prefix}'`] : []),
    ...(tables.schema !== undefined ? [`schema: '${tables.schema}'`] : []),
  ];
  return parts.length === 0 ? '' : `{ ${parts.join(', ')} }`;
}
