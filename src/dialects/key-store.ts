import type { SqlOutboxDialect } from './sql-dialect.base';
import type { DataSource, EntityManager } from 'typeorm';
import type { OutboxStatement } from '../transaction/transaction.types';
import { createHash } from 'node:crypto';
import type { OutboxDialect } from './outbox-dialect';
import { indexNamesOf, tableNameOf } from '../schema/outbox-table-names';

/** The columns an insert writes, in the order of its values. */
const INSERT_COLUMNS = [
  'scope',
  'idempotency_key',
  'fingerprint',
  'response_status',
  'response_body',
  'response_headers',
  'created_at',
  'expires_at',
] as const;

/**
 * How a database guards a key besides its record: one statement tries two non-blocking locks, the request's
 * (key and fingerprint) first and the key's only when it got that one; its row's `taken` is 2 with both, 1 with
 * the request's only (the key is held by a different request: 422), 0 with neither (a request with this
 * fingerprint is contending: 409). The key's holder so always holds the lock of its own fingerprint; taking the
 * key's lock first could meet a holder that had not taken its own yet, and tell a plain retry it is another request.
 */
export interface KeyLock {
  readonly statement: OutboxStatement;
  /** Statements that give the locks back once the transaction has ended (none when they end with it). */
  readonly release: OutboxStatement[];
}

/**
 * The idempotency store of every SQL database, in statements with bound values: the key's lock (`lock()`), the
 * committed record's read, the record's insert. The transaction runner runs them in the transaction it holds
 * (`IdempotencyService.begin`): lock, read (under READ COMMITTED and REPEATABLE READ alike the read's snapshot starts
 * after the lock, so a winner that just committed is seen), the handler, insert, commit, then any release. Each
 * database adds its lock, the bound on its statements' lock waits (`bounded()`) and its batched delete.
 */
export abstract class SqlIdempotencyStore implements IdempotencyStore {
  protected readonly dialect: SqlOutboxDialect;
  protected readonly table: string;

  constructor(protected readonly config: IdempotencyStoreConfig) {
    this.dialect = config.dialect as unknown as SqlOutboxDialect;
    this.table = this.dialect.quoteTable(config.table);
  }

  /** The key's locks; undefined where the held transaction alone keeps others out (SQLite's turn). */
  protected abstract lock(scope: string, key: string, fingerprint: string): KeyLock | undefined;

  /** SQL that deletes up to `limit` expired records. */
  protected abstract deleteExpiredSql(limit: number): string;

  /**
   * `statements` with their lock waits bounded by `lockTimeout` where the database can bound them, and the index
   * of the first of them in the result (statements may be added around them). Unchanged by default.
   */
  protected async bounded(
    statements: OutboxStatement[],
    _limits: IdempotencyWaitLimits,
  ): Promise<{ statements: OutboxStatement[]; offset: number }> {
    return { statements, offset: 0 };
  }

  /** A placeholder of a value of `type` (PostgreSQL needs the type where the statement alone does not tell it). */
  protected typed(placeholder: string, _type: 'int' | 'bigint'): string {
    return placeholder;
  }

  protected get q(): (column: string) => string {
    return (column) => this.dialect.quote(column);
  }

  protected where(): string {
    const { q } = this;
    return `${q('scope')} = ${this.dialect.param(1)} AND ${q('idempotency_key')} = ${this.dialect.param(2)}`;
  }

  protected readStatement(scope: string, key: string): OutboxStatement {
    const { q } = this;
    return {
      sql: `SELECT ${RECORD_COLUMNS.map(q).join(', ')},
          CASE WHEN ${q('expires_at')} <= ${this.dialect.nowMs} THEN 1 ELSE 0 END AS ${q('expired')}
        FROM ${this.table} WHERE ${this.where()}`,
      params: [scope, key],
    };
  }

  async take(
    scope: string,
    key: string,
    fingerprint: string,
    limits: IdempotencyWaitLimits,
    _message?: { ttl: number },
  ): Promise<KeyTaking> {
    const lock = this.lock(scope, key, fingerprint);
    const own = lock ? [lock.statement, this.readStatement(scope, key)] : [this.readStatement(scope, key)];
    const { statements, offset } = await this.bounded(own, limits);
    return {
      statements,
      release: lock?.release ?? [],
      outcome: (rows): IdempotencyTake => {
        const taken = lock ? Number((rows[offset]?.[0] as { taken?: unknown } | undefined)?.taken) : 2;
        const { record, expired } = toStored(rows[offset + own.length - 1]?.[0]);
        if (record) return { kind: 'stored', record };
        if (taken !== 2) return { kind: 'in-flight', sameRequest: taken === 0 };
        return { kind: 'acquired', expired };
      },
    };
  }

  async record(
    scope: string,
    key: string,
    record: NewIdempotencyRecord,
    taken: KeyTaken,
    limits: IdempotencyWaitLimits,
  ): Promise<OutboxStatement[]> {
    const { q } = this;
    const p = (n: number) => this.dialect.param(n);
    const insert: OutboxStatement = {
      sql: `INSERT INTO ${this.table} (${INSERT_COLUMNS.map(q).join(', ')})
        SELECT ${p(1)}, ${p(2)}, ${p(3)}, ${this.typed(p(4), 'int')}, ${p(5)}, ${p(6)}, n.ms, n.ms + ${this.typed(p(7), 'bigint')}
        FROM (SELECT ${this.dialect.nowMs} AS ms) AS n`,
      params: [scope, key, record.fingerprint, record.status, record.body, record.headers, Math.floor(record.ttl)],
    };
    const replace = { sql: `DELETE FROM ${this.table} WHERE ${this.where()}`, params: [scope, key] };
    return (await this.bounded(taken.expired ? [replace, insert] : [insert], limits)).statements;
  }

  async read(manager: EntityManager, scope: string, key: string): Promise<StoredIdempotencyRecord | undefined> {
    const { sql, params } = this.readStatement(scope, key);
    const { records } = await this.dialect.execute(manager, sql, [...(params ?? [])]);
    return toStored(records[0]).record;
  }

  async deleteExpired(manager: EntityManager, limit: number): Promise<number> {
    const { affected } = await this.dialect.execute(manager, this.deleteExpiredSql(Math.max(1, Math.floor(limit))));
    return affected;
  }
}

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
 * (`src/dialects/<database>/<database>.key-store.ts` over the `SqlIdempotencyStore` below). A store writes
 * statements; the transaction is the transaction runner's (`holdTransaction`, see `IdempotencyService.begin`),
 * never the store's: the key's statements open it (`take`), the
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
