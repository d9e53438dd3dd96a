import type { DataSource, EntityManager } from 'typeorm';

/** A row to insert into the outbox table. Times are epoch milliseconds; `undefined` means "now" on the DB clock. */
export interface NewOutboxRow {
  messageId: string;
  pattern: string;
  /** JSON text. */
  payload: string;
  /** JSON text of a string map, or null. */
  headers: string | null;
  key: string | null;
  /**
   * Where the row goes (see `destination-names.ts`): `''` or absent for every destination of the message, decided
   * at publish time.
   */
  destination?: string;
  /** Absolute due time (epoch ms), from the caller's `availableAt`. */
  availableAt?: number;
  /** Delay in ms after the database's now. Ignored when `availableAt` is set. */
  delay?: number;
  /** Absolute expiry (epoch ms), from the caller's `expiresAt`; absent with neither this nor `expiresIn`: never. */
  expiresAt?: number;
  /** Expiry in ms after the database's now (the insert's). Ignored when `expiresAt` is set. */
  expiresIn?: number;
  /** The idempotency record (scope, key) of the call that emitted the row (`cause_scope`, `cause_key`); absent: none. */
  cause?: { scope: string; key: string };
}

/** A claimed row as the publisher needs it. */
export interface ClaimedOutboxRow {
  seq: string;
  messageId: string;
  pattern: string;
  payload: string;
  headers: string | null;
  key: string | null;
  /** Where the row goes: `''` (every destination of the message), `broker:<token>` or `handler:<name>`. */
  destination: string;
  /** Attempts including the one this claim starts. */
  attempts: number;
  /** Age of the row when it was claimed, in ms on the database clock (now − `created_at`); absent if not read. */
  ageMs?: number;
  /**
   * Time the row had left before it expires when it was claimed, in ms on the database clock (`expires_at` − now;
   * 0 or less: expired); absent for a row without expiry.
   */
  expiresInMs?: number;
  /** When the claim returned, on this process's `performance.now()` clock (set by the publisher, not the dialect). */
  claimedAt?: number;
}

/** Outcome of one failed publish, to be written back. */
export interface OutboxFailure {
  seq: string;
  error: string;
  /** Delay before the next attempt (ms, on the database clock); ignored when `dead`. */
  retryDelay: number;
  /** Mark the message dead instead of scheduling a retry. */
  dead: boolean;
  /**
   * The broker could not be reached, or never confirmed the publish (an unknown outcome): the attempt counted at
   * claim is given back (the row keeps its attempts), so neither an outage nor a slow broker moves a message toward
   * `retry.maxAttempts`. @default false
   */
  transportUnreachable?: boolean;
  /** Class name of the error (e.g. `OutboxPublishTimeoutError`), for metrics' `error.type`; not written. */
  errorType?: string;
  /** How long the failed attempt ran (ms) before it failed; not written. */
  durationMs?: number;
}

/** Counts for `OutboxService.stats()`. */
export interface OutboxStats {
  /** Rows waiting to be published (due or not, claimed or not). */
  pending: number;
  /** Pending rows that are due now and not claimed. */
  due: number;
  /** Pending rows claimed by a publisher whose lease is still running. */
  inFlight: number;
  /** Rows that exhausted their attempts (or failed for good) and wait to be requeued or purged. */
  dead: number;
  /** Age in ms (database clock) of the oldest pending row, or 0 when none is pending: the relay's lag. */
  oldestPendingAgeMs: number;
}

/** A table a dialect needs beside the outbox table, with the columns its statements use. */
export interface CompanionTable {
  table: string;
  columns: readonly string[];
}

/** A unique index by name, unqualified table and columns. */
export interface UniqueIndexDescription {
  name: string;
  table: string;
  columns: readonly string[];
}

/**
 * Which dead rows a query or an operation applies to: every condition given must hold (none given: every dead row).
 * Times are epoch milliseconds on the database clock; `…Since` is inclusive, `…Before` exclusive.
 */
export interface DeadRowFilter {
  messageIds?: readonly string[];
  /** Only these rows, by `seq` (a failure group's rows, found by `OutboxDeadLetters`). */
  seqs?: readonly string[];
  pattern?: string;
  key?: string;
  /** The row's destination (`''`, `broker:<token>`, `handler:<name>`). */
  destination?: string;
  /** Case-insensitive substring of the last error. */
  errorContains?: string;
  deadSince?: number;
  deadBefore?: number;
  createdSince?: number;
  createdBefore?: number;
}

/**
 * Which dead rows an operation applies to: the given message ids, the rows a filter matches, or all of them when
 * omitted.
 */
export type DeadSelection = readonly string[] | DeadRowFilter | undefined;

/** A dead row's place in the newest-first order (`dead_at` descending, then `seq` descending). */
export interface DeadRowPosition {
  deadAt: number;
  seq: string;
}

/** One page of dead rows: those matching `filter`, newest death first, after `after` when given. */
export interface DeadRowsQuery {
  filter: DeadRowFilter;
  after?: DeadRowPosition;
  limit: number;
}

/** A dead row as a page lists it (without payload and headers). Times are epoch ms; `deadAt` 0 when unknown. */
export interface DeadRow {
  seq: string;
  messageId: string;
  pattern: string;
  key: string | null;
  /** Where the row goes: `''` (every destination of the message), `broker:<token>` or `handler:<name>`. */
  destination: string;
  attempts: number;
  createdAt: number;
  deadAt: number;
  lastError: string | null;
}

/** One recorded failed attempt of a message. `failedAt` is epoch ms on the database clock. */
export interface AttemptRow {
  attempt: number;
  failedAt: number;
  counted: boolean;
  error: string;
  owner: string;
  publisher: string;
}

/** What `replaceDead()` writes: the dead rows of one message replaced by a corrected copy. */
export interface DeadReplacement {
  /** The original's message id. */
  messageId: string;
  /** Its dead rows to replace (all must still be dead with this id, else nothing changes). */
  seqs: readonly string[];
  /** The copy's new id, payload (JSON text) and headers (JSON text or null). */
  newMessageId: string;
  payload: string;
  headers: string | null;
  /** The audit written on the replaced rows (JSON text), given the database's now in epoch ms. */
  audit: (now: number) => string;
}

/** One row `replaceDead()` replaced: the copy kept `seq`, the original now lives at `replacedSeq`. */
export interface ReplacedRow {
  seq: string;
  replacedSeq: string;
  destination: string;
}

/** How `markFailed()` records the attempt history. */
export interface AttemptHistoryOptions {
  /** The publisher instance that made the attempts (e.g. `hostname:pid`). */
  publisher: string;
  /** Attempts kept per message (the newest); 0 records none. */
  limit: number;
}

export interface ClaimRequest {
  /** Table name (already resolved, unquoted). */
  table: string;
  /** Fencing token of this claim. */
  owner: string;
  limit: number;
  leaseMs: number;
  /**
   * PostgreSQL WAL modes: leave the rows the stream reader has in hand — never attempted, not delayed, younger
   * than this many ms — to it. Absent: every due row.
   */
  walHandoffMs?: number;
}

/**
 * Everything that differs between databases. One implementation per database; nothing else in the library
 * writes SQL that depends on the dialect.
 */
export interface OutboxDialect {
  readonly name: 'postgres' | 'mysql' | 'sqlite';
  /** SQL expression of the database clock as epoch milliseconds. */
  readonly nowMs: string;
  /** Quotes an identifier. */
  quote(identifier: string): string;
  /** Placeholder of the i-th (1-based) query parameter. */
  param(index: number): string;
  /** Prepares what the dialect needs once at startup (MySQL: the key-lock rows). Idempotent. */
  prepare(manager: EntityManager, table: string): Promise<void>;
  /** Closes what the dialect opened for `dataSource` (PostgreSQL: the relay's own pool); called at shutdown. */
  dispose(dataSource: DataSource): Promise<void>;
  /** Bind parameters one statement may carry on this database (multi-row inserts are split to stay under it). */
  readonly maxBindParameters: number;
  /**
   * Inserts rows, in order, through `manager` (the caller's transaction): one multi-row statement, or as few as the
   * database's limits on bind parameters and statement size allow.
   */
  insert(manager: EntityManager, table: string, rows: readonly NewOutboxRow[]): Promise<void>;
  /**
   * Inserts one row that has already failed once (a consumer's message stored as an inbox row): 1 counted attempt,
   * due after `failure.retryDelay` or dead, its error in the attempt history. A duplicate `(message_id,
   * destination)` rejects with the unique violation. Through `manager` (the caller's transaction).
   */
  insertFailed(
    manager: EntityManager,
    table: string,
    row: NewOutboxRow & { destination: string },
    failure: { error: string; retryDelay: number; dead: boolean },
    history: AttemptHistoryOptions,
  ): Promise<void>;
  /** Claims up to `limit` due, unclaimed, pending rows for `owner`, counting one attempt each. */
  claim(manager: EntityManager, request: ClaimRequest): Promise<ClaimedOutboxRow[]>;
  /** Marks rows sent, only where `owner` still holds the claim. Resolves with the number of rows marked. */
  markSent(manager: EntityManager, table: string, owner: string, seqs: readonly string[]): Promise<number>;
  /**
   * Records failures (retry later or dead; an unreachable broker's attempt given back), only where `owner` still
   * holds the claim. Errors are stored redacted of credentials. A row marked dead gets `dead_at` = now. With
   * `history` (and a limit above 0), also appends one attempt row per failure of a row still held, in the same
   * transaction, and keeps only the newest `history.limit` attempts of each of those messages. Resolves with rows
   * changed.
   */
  markFailed(
    manager: EntityManager,
    table: string,
    owner: string,
    failures: readonly OutboxFailure[],
    history?: AttemptHistoryOptions,
  ): Promise<number>;
  /**
   * Extends the lease of the rows `seqs` that `owner` still holds to `leaseMs` from now on the database clock (a
   * batch whose broker confirms are slow keeps its rows). Resolves with the number of rows extended: fewer than
   * `seqs` means another publisher took the rest over.
   */
  extendLease(
    manager: EntityManager,
    table: string,
    owner: string,
    seqs: readonly string[],
    leaseMs: number,
  ): Promise<number>;
  /** Releases claims that were not started (shutdown): the rows become due again at once, the attempt uncounted. */
  release(manager: EntityManager, table: string, owner: string, seqs: readonly string[]): Promise<number>;
  /** Deletes rows that were published, only where `owner` still holds the claim (delete-on-publish mode). */
  deleteSent(manager: EntityManager, table: string, owner: string, seqs: readonly string[]): Promise<number>;
  /** Counts pending / due / in-flight / dead rows and the age of the oldest pending one. */
  stats(manager: EntityManager, table: string): Promise<OutboxStats>;
  /**
   * Makes the selected dead rows — and only those — pending again (attempts reset, due now, `dead_at` 0). Resolves
   * with the number requeued.
   */
  requeueDead(manager: EntityManager, table: string, selection: DeadSelection): Promise<number>;
  /** Counts the selected dead rows per pattern: one grouped query. */
  countDeadByPattern(
    manager: EntityManager,
    table: string,
    selection: DeadSelection,
  ): Promise<Array<{ pattern: string; count: number }>>;
  /**
   * Replaces dead rows by a corrected copy in the caller's transaction (see `dead-letter-edit.sql.ts`): the copy
   * takes each row's place (its `seq`), the original is kept as a `replaced` row with the audit and its history.
   * Resolves with the rows replaced, or `[]` when any of them is no longer dead with the original id (nothing
   * changed then).
   */
  replaceDead(manager: EntityManager, table: string, replacement: DeadReplacement): Promise<ReplacedRow[]>;
  /** Deletes the selected dead rows (their attempt history with them). Resolves with the number deleted. */
  purgeDead(manager: EntityManager, table: string, selection: DeadSelection): Promise<number>;
  /** Dead rows matching the query, newest death first (ties: higher `seq` first), at most `limit`. */
  listDead(manager: EntityManager, table: string, query: DeadRowsQuery): Promise<DeadRow[]>;
  /** Number of dead rows matching the filter. */
  countDead(manager: EntityManager, table: string, filter: DeadRowFilter): Promise<number>;
  /** The recorded attempts of the message `seq` of the outbox table `table`, oldest first. */
  listAttempts(manager: EntityManager, table: string, seq: string): Promise<AttemptRow[]>;
  /**
   * Deletes up to `limit` sent rows older than `retentionMs` (by `sent_at`, on the database clock) in one short
   * statement/transaction, skipping rows another replica is deleting. Resolves with the number deleted.
   */
  deleteExpiredSent(manager: EntityManager, table: string, retentionMs: number, limit: number): Promise<number>;
  /**
   * True when `error` is a unique-constraint violation — of the given index when one is given (by name, or by name,
   * unqualified table and columns, which SQLite needs: its errors name the columns, not the index).
   */
  isUniqueViolation(error: unknown, index?: string | UniqueIndexDescription): boolean;
  /**
   * The column names of `table` (a TypeORM table path, schema-qualified or not), with the name resolved as the
   * library's own statements resolve it; empty when the table does not exist. One query on the catalog.
   */
  tableColumns(manager: EntityManager, table: string): Promise<string[]>;
  /** Tables this dialect needs beside the outbox table `table` (MySQL/MariaDB: the key locks). */
  companionTables(table: string): CompanionTable[];
}
