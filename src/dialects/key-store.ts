import { createHash } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import type { OutboxDialect } from './outbox-dialect';
import type { SqlOutboxDialect } from './sql-dialect.base';
import type { OutboxStatement } from '../transaction/transaction.types';
import { indexNamesOf, tableNameOf } from '../schema/outbox-table-names';

/** The bounds of the library's own waits while it takes a key and writes its record (see `IdempotencyDefaults`). */
export interface IdempotencyWaitLimits {
  /** Milliseconds to wait for a pooled connection. */
  connectionTimeout: number;
  /** Milliseconds one of the library's statements waits for a lock held by another transaction. */
  lockTimeout: number;
  /** Milliseconds to wait for the answer to one of the library's own round trips (client side). */
  statementTimeout: number;
}

/** A completed record as read back for a replay. */
export interface StoredIdempotencyRecord {
  fingerprint: string;
  status: number | null;
  /** JSON text of the response, or null when there was none. */
  body: string | null;
  /** JSON text of the replayed headers, or null. */
  headers: string | null;
}

/** What the winner writes, together with its commit. */
export interface NewIdempotencyRecord {
  fingerprint: string;
  status: number | null;
  body: string | null;
  headers: string | null;
  /** Milliseconds until the record expires (on the database clock). */
  ttl: number;
}

/**
 * Everything about idempotency records that depends on the database: one store per database
 * (`src/dialects/<database>/<database>.key-store.ts` over `sql-key-store.ts`). A store writes statements; the transaction is the transaction runner's
 * (`holdTransaction`, see `held-attempt.ts`), never the store's: the key's statements open it (`take`), the
 * record's close it (`record`), and on PostgreSQL the runner sends them with BEGIN and with COMMIT.
 *
 * Taking a key never waits for another transaction: a non-blocking lock on (scope, key) — and one on (scope, key,
 * fingerprint), which tells a loser whether the request in flight is the same as its own — then the committed
 * record's read. A live record wins (replay or 422); else a lock held elsewhere means "in flight" (409, or 422 when
 * the in-flight request is a different one); else the caller owns the key until commit or rollback. The unique
 * constraint on (scope, key) stays the final arbiter at commit.
 */
export interface IdempotencyStore {
  /**
   * The statements that take (scope, key) for a call with `fingerprint`, and how to read their rows. `message`: the
   * call is a message (a delivery, `once()`), which needs no prompt answer — a redelivery may wait for the first
   * delivery, at most `lockTimeout` — so a store may write the key first (PostgreSQL), with the record's expiry.
   */
  take(
    scope: string,
    key: string,
    fingerprint: string,
    limits: IdempotencyWaitLimits,
    message?: { ttl: number },
  ): Promise<KeyTaking>;
  /** The statements that write the record of a key `taken`, run as the transaction commits. */
  record(
    scope: string,
    key: string,
    record: NewIdempotencyRecord,
    taken: KeyTaken,
    limits: IdempotencyWaitLimits,
  ): Promise<OutboxStatement[]>;
  /** Reads the committed record on `manager` (after losing the race at commit: outside the lost transaction). */
  read(manager: EntityManager, scope: string, key: string): Promise<StoredIdempotencyRecord | undefined>;
  /** Deletes up to `limit` expired records in one short statement on `manager`; resolves with the number deleted. */
  deleteExpired(manager: EntityManager, limit: number): Promise<number>;
}

/** The statements that take a key (run first in the held transaction), and what their rows say. */
export interface KeyTaking {
  readonly statements: OutboxStatement[];
  /**
   * Statements for the transaction's connection once the transaction has ended, however it ended: they give back a
   * lock that outlives transactions (MySQL's `GET_LOCK`; releasing one not held is harmless). Empty elsewhere.
   */
  readonly release: OutboxStatement[];
  outcome(rows: unknown[][]): IdempotencyTake;
  /** True for an error of the key's statements that means a duplicate is still in flight (a lock wait that ended). */
  inFlight?(error: unknown): boolean;
}

/** A key the caller owns: whether an expired record is in the way, or the key's row is already written. */
export interface KeyTaken {
  kind: 'acquired';
  expired: boolean;
  /** The key's row was written by `take()` (the record's values are then updated, not inserted). */
  written?: boolean;
}

/** Outcome of a key's statements. */
export type IdempotencyTake =
  { kind: 'stored'; record: StoredIdempotencyRecord } | { kind: 'in-flight'; sameRequest: boolean } | KeyTaken;

/** What every store is built from. */
export interface IdempotencyStoreConfig {
  dataSource: DataSource;
  dialect: OutboxDialect;
  /** Table path, unquoted. */
  table: string;
}

/** A 64-bit lock id, or a short lock name, for (database, table, scope, key[, fingerprint]): the same in every process. */
export function lockDigest(database: string, table: string, scope: string, key: string, fingerprint = ''): Buffer {
  return createHash('sha256')
    .update(`${database}\u0000${table}\u0000${scope}\u0000${key}\u0000${fingerprint}`)
    .digest();
}

/** Columns read back for a replay, in this order. */
export const RECORD_COLUMNS = ['fingerprint', 'response_status', 'response_body', 'response_headers'] as const;

/** Maps a record row (snake_case columns, plus `expired`) to a stored record, or undefined when absent/expired. */
export function toStored(row: any): { record?: StoredIdempotencyRecord; expired: boolean } {
  if (!row) return { expired: false };
  const expired = row.expired === true || Number(row.expired) === 1;
  if (expired) return { expired: true };
  return {
    expired: false,
    record: {
      fingerprint: row.fingerprint,
      status: row.response_status === null || row.response_status === undefined ? null : Number(row.response_status),
      body: row.response_body ?? null,
      headers: row.response_headers ?? null,
    },
  };
}

/** True when `error` is a violation of the records' (scope, key) constraint, not of one of the handler's tables. */
export function isKeyViolation(config: IdempotencyStoreConfig, error: unknown): boolean {
  return (config.dialect as unknown as SqlOutboxDialect).isUniqueViolation(error, {
    name: indexNamesOf.idempotencyKeys(tableNameOf(config.table)).scopeKeyUnique,
    table: config.table,
    columns: ['scope', 'idempotency_key'],
  });
}
