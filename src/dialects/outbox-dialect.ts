import type { EntityManager } from 'typeorm';

/** A row to insert into the outbox table. Times are epoch milliseconds; `undefined` means "now" on the DB clock. */
export interface NewOutboxRow {
  messageId: string;
  pattern: string;
  /** JSON text. */
  payload: string;
  /** JSON text of a string map, or null. */
  headers: string | null;
  key: string | null;
  /** Absolute due time (epoch ms), from the caller's `availableAt`. */
  availableAt?: number;
  /** Delay in ms after the database's now. Ignored when `availableAt` is set. */
  delay?: number;
}

/** A claimed row as the publisher needs it. */
export interface ClaimedOutboxRow {
  seq: string;
  messageId: string;
  pattern: string;
  payload: string;
  headers: string | null;
  key: string | null;
  /** Attempts including the one this claim starts. */
  attempts: number;
}

/** Outcome of one failed publish, to be written back. */
export interface OutboxFailure {
  seq: string;
  error: string;
  /** Delay before the next attempt (ms, on the database clock); ignored when `dead`. */
  retryDelay: number;
  /** Mark the message dead instead of scheduling a retry. */
  dead: boolean;
}

export interface ClaimRequest {
  /** Table name (already resolved, unquoted). */
  table: string;
  /** Fencing token of this claim. */
  owner: string;
  limit: number;
  leaseMs: number;
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
  /** Inserts rows in one statement through `manager` (the caller's transaction). */
  insert(manager: EntityManager, table: string, rows: readonly NewOutboxRow[]): Promise<void>;
  /** Claims up to `limit` due, unclaimed, pending rows for `owner`, counting one attempt each. */
  claim(manager: EntityManager, request: ClaimRequest): Promise<ClaimedOutboxRow[]>;
  /** Marks rows sent, only where `owner` still holds the claim. Resolves with the number of rows marked. */
  markSent(manager: EntityManager, table: string, owner: string, seqs: readonly string[]): Promise<number>;
  /** Records failures (retry later or dead), only where `owner` still holds the claim. Resolves with rows changed. */
  markFailed(manager: EntityManager, table: string, owner: string, failures: readonly OutboxFailure[]): Promise<number>;
  /** Releases claims that were not started (shutdown): the rows become due again at once, the attempt uncounted. */
  release(manager: EntityManager, table: string, owner: string, seqs: readonly string[]): Promise<number>;
  /** True when `error` is a unique-constraint violation (of the index `indexName`, when given). */
  isUniqueViolation(error: unknown, indexName?: string): boolean;
}
