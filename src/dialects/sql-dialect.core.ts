import type { DataSource, EntityManager } from 'typeorm';
import { insertChunks } from './insert-chunks';
import { inManagerTransaction } from '../transaction/connection-transaction';
import type {
  ClaimedOutboxRow,
  ClaimRequest,
  CompanionTable,
  NewOutboxRow,
  OutboxDialect,
  UniqueIndexDescription,
} from './outbox-dialect';

/** A unique index, described well enough for every database's error to be matched against it. */
export type UniqueIndexRef = UniqueIndexDescription;

/** How a statement runs. */
export interface ExecuteOptions {
  /**
   * A statement of the publisher's relay (claim, completion writes) run outside any caller's transaction: a dialect
   * may send it over its own connections (PostgreSQL: a small pool with `synchronous_commit = off`).
   */
  relay?: boolean;
  /** A stable name for a statement whose text never changes, so the database may keep it prepared. */
  name?: string;
  /**
   * Milliseconds the statement may wait for a lock (a DDL on the table) before it fails (PostgreSQL `55P03`): a
   * relay statement on PostgreSQL then runs in a transaction of its own with `SET LOCAL lock_timeout`. None by default.
   */
  lockTimeout?: number;
}

/** Result of a statement: the rows it returned and the number of rows it changed. */
export interface StatementResult {
  records: any[];
  affected: number;
}

const SEQ = /^\d+$/;

/** Checks that a sequence number is a plain integer before it is inlined into SQL. */
export function checkedSeq(seq: string): string {
  if (!SEQ.test(seq)) throw new Error(`Invalid outbox sequence number: ${JSON.stringify(seq)}`);
  return seq;
}

/** Checks that a time is an integer number of milliseconds before it is inlined into SQL. */
export function checkedMs(ms: number): string {
  if (!Number.isSafeInteger(ms)) throw new Error(`Invalid epoch milliseconds: ${String(ms)}`);
  return String(ms);
}

/**
 * Milliseconds the relay's claim waits for a lock before it fails and the relay claims again at its next poll.
 * `SKIP LOCKED` never waits for a row; this bounds the wait for a table lock (a migration's `ALTER TABLE`,
 * `VACUUM FULL`, `LOCK TABLE`). MySQL/MariaDB count it in whole seconds.
 */
export const CLAIM_LOCK_TIMEOUT_MS = 2000;

/** Most rows one multi-row INSERT of attempt history carries. */
export const INSERT_CHUNK = 500;

/**
 * Bytes of payload and headers text one multi-row INSERT of outbox rows carries at most (well under MariaDB's
 * default `max_allowed_packet` of 16 MiB; on PostgreSQL and SQLite it only bounds the size of one statement).
 */
export const MAX_INSERT_BYTES = 4 * 1024 * 1024;

/**
 * The foundation of the SQL dialects: quoting, statements, inserts, the table's companions, unique violations.
 * The outbox's own statements build on it in two layers: the dead letters (sql-dialect.dead-letters.ts), then the
 * relay's completion writes and stats (sql-dialect.base.ts).
 */
export abstract class SqlDialectCore {
  abstract readonly name: OutboxDialect['name'];
  abstract readonly nowMs: string;
  /**
   * "Now" for the stamps of one INSERT (`created_at`, `available_at`, `expires_at`): one value for the whole statement, so a
   * delayed row's `available_at` is exactly `created_at + delay`. Defaults to `nowMs`, which is already fixed per
   * statement on MySQL and SQLite; PostgreSQL's `clock_timestamp()` is not, so it names `statement_timestamp()`.
   */
  get insertNowMs(): string {
    return this.nowMs;
  }
  abstract quote(identifier: string): string;
  abstract param(index: number): string;
  /** Bind parameters one statement may carry on this database: `emitMany()` splits its INSERT to stay under it. */
  abstract readonly maxBindParameters: number;
  abstract claim(manager: EntityManager, request: ClaimRequest): Promise<ClaimedOutboxRow[]>;
  protected abstract uniqueViolationDetails(error: any): { code: boolean; text: string } | undefined;

  /** Quotes a table path such as `schema.table`. */
  quoteTable(path: string): string {
    return path
      .split('.')
      .map((part) => this.quote(part))
      .join('.');
  }

  /** Runs one statement and reports the rows it returned and changed, the same way on every driver. */

  async execute(
    manager: EntityManager,
    sql: string,
    params: unknown[] = [],
    _options: ExecuteOptions = {},
  ): Promise<StatementResult> {
    const own = manager.queryRunner ? undefined : manager.connection.createQueryRunner();
    const runner = manager.queryRunner ?? own!;
    try {
      const result = await runner.query(sql, params, true);
      const records = Array.isArray(result.records) ? result.records : [];
      return { records, affected: Number(result.affected ?? records.length ?? 0) };
    } finally {
      if (own) await own.release();
    }
  }

  async insert(manager: EntityManager, table: string, rows: readonly NewOutboxRow[]): Promise<void> {
    const keys = [...new Set(rows.map((r) => r.key).filter((k): k is string => k !== null))].sort();
    if (keys.length > 0) await this.lockKeys(manager, table, keys);
    const limits = { maxParameters: this.maxBindParameters, maxBytes: MAX_INSERT_BYTES };
    for (const chunk of rows.length === 1 ? [rows] : insertChunks(rows, limits)) {
      const params: unknown[] = [];
      const p = (value: unknown) => {
        params.push(value);
        return this.param(params.length);
      };
      const now = this.insertNowMs;
      const values = chunk.map((row) => {
        // Placeholders are positional on MySQL and SQLite: push parameters in the order they appear.
        const head = `${p(row.messageId)}, ${p(row.pattern)}, ${p(row.payload)}, ${p(row.headers)}, ${p(row.key)}`;
        const destination = row.destination ? p(row.destination) : `''`;
        const due =
          row.availableAt !== undefined ? p(row.availableAt) : row.delay ? `${now} + ${p(Math.floor(row.delay))}` : now;
        const expires =
          row.expiresAt !== undefined
            ? p(row.expiresAt)
            : row.expiresIn !== undefined
              ? `${now} + ${p(Math.ceil(row.expiresIn))}`
              : 'NULL';
        const cause = row.cause ? `${p(row.cause.scope)}, ${p(row.cause.key)}` : 'NULL, NULL';
        return `(${head}, ${destination}, 'pending', 0, ${due}, ${expires}, ${now}, ${cause})`;
      });
      const q = (c: string) => this.quote(c);
      await this.execute(
        manager,
        `
          INSERT INTO ${this.quoteTable(table)} (
            ${q('message_id')}, ${q('pattern')}, ${q('payload')}, ${q('headers')}, ${q('ordering_key')},
            ${q('destination')}, ${q('status')}, ${q('attempts')}, ${q('available_at')}, ${q('expires_at')},
            ${q('created_at')}, ${q('cause_scope')}, ${q('cause_key')}
          )
          VALUES ${values.join(', ')}`,
        params,
      );
    }
  }

  async prepare(_manager: EntityManager, _table: string): Promise<void> {}

  abstract tableColumns(manager: EntityManager, table: string): Promise<string[]>;

  /** No table beside the outbox table by default. */
  companionTables(_table: string): CompanionTable[] {
    return [];
  }

  /** Splits a table path into its unqualified name and its schema (or database), when it has one. */
  protected splitTablePath(table: string): { schema: string | null; name: string } {
    const parts = table.split('.');
    const name = parts.pop()!;
    return { schema: parts.length > 0 ? parts.join('.') : null, name };
  }

  /** Closes what the dialect opened for `dataSource` (PostgreSQL: the relay's own pool). */
  async dispose(_dataSource: DataSource): Promise<void> {}

  /**
   * Serializes writers of the same ordering keys until the caller's transaction ends, so a key's rows get their
   * sequence numbers in commit order. Keys arrive sorted (a fixed lock order within one call). Default: nothing
   * (SQLite has one writer at a time).
   */
  protected async lockKeys(_manager: EntityManager, _table: string, _keys: readonly string[]): Promise<void> {}

  /** Runs `work` in the manager's transaction, or in a new one when the manager has none. */
  protected inTransaction<T>(manager: EntityManager, work: (tx: EntityManager) => Promise<T>): Promise<T> {
    return inManagerTransaction(manager, work);
  }

  isUniqueViolation(error: unknown, index?: UniqueIndexRef | string): boolean {
    const err = error as any;
    const details = this.uniqueViolationDetails(err?.driverError ?? err);
    if (!details?.code) return false;
    if (!index) return true;
    return this.matchesIndex(details.text, typeof index === 'string' ? { name: index, table: '', columns: [] } : index);
  }

  /** Whether the error text names the index (PostgreSQL, MySQL) — SQLite overrides this to match columns. */
  protected matchesIndex(text: string, index: UniqueIndexRef): boolean {
    return text.includes(index.name);
  }
}
