import type { EntityManager } from 'typeorm';
import type { ClaimedOutboxRow } from '../../outbox-dialect';
import { checkedMs, checkedSeq, type ExecuteOptions, type StatementResult } from '../../sql-dialect.core';

/** What these statements use of `PostgresOutboxDialect` (which builds its claim with `walPolledCondition()`). */
export interface WalSqlDialect {
  readonly nowMs: string;
  quote(identifier: string): string;
  quoteTable(path: string): string;
  execute(manager: EntityManager, sql: string, params?: unknown[], options?: ExecuteOptions): Promise<StatementResult>;
}

/*
 * The statements of the WAL relay on the outbox table. The rows the stream reader publishes are never claimed: it
 * is the only reader of its slot, and polling leaves such rows to it (`walPolledCondition()`). Afterwards they are
 * marked sent (or deleted) in one statement per batch; a failed row is claimed then (under an owner token, so the
 * usual fenced `markFailed()` writes its retry or dead state); a row the reader does not publish is handed back
 * to polling.
 */

/**
 * The rows polling takes in a WAL mode (alias `m`): attempted before, delayed (`available_at` ≠ `created_at`,
 * rows handed back included), or older than `handoffMs` (a safety net for rows written while no reader streamed,
 * before the slot existed, or while the reader is stuck).
 */
export function walPolledCondition(dialect: WalSqlDialect, m: string, handoffMs: number): string {
  const q = (c: string) => `${m}.${dialect.quote(c)}`;
  return (
    `(${q('attempts')} > 0 OR ${q('available_at')} <> ${q('created_at')} ` +
    `OR ${q('created_at')} <= ${dialect.nowMs} - ${checkedMs(Math.floor(handoffMs))})`
  );
}

const seqList = (seqs: readonly string[]) => seqs.map(checkedSeq).join(', ');

/** Rows the reader published, still pending and unclaimed: marked sent (or deleted). Resolves with the count. */
export async function markStreamedSent(
  dialect: WalSqlDialect,
  manager: EntityManager,
  table: string,
  seqs: readonly string[],
  deleteOnPublish: boolean,
): Promise<number> {
  if (seqs.length === 0) return 0;
  const q = (c: string) => dialect.quote(c);
  const t = dialect.quoteTable(table);
  const where = `${q('seq')} IN (${seqList(seqs)}) AND ${q('status')} = 'pending' AND ${q('claimed_by')} IS NULL`;
  const sql = deleteOnPublish
    ? `DELETE FROM ${t} WHERE ${where}`
    : `UPDATE ${t} SET ${q('status')} = 'sent', ${q('sent_at')} = ${dialect.nowMs} WHERE ${where}`;
  const { affected } = await dialect.execute(manager, sql, [], { relay: true });
  return affected;
}

/** Rows the reader does not publish (their key is held back, or expired): left to polling, due at once. */
export async function handBack(
  dialect: WalSqlDialect,
  manager: EntityManager,
  table: string,
  seqs: readonly string[],
): Promise<number> {
  if (seqs.length === 0) return 0;
  const q = (c: string) => dialect.quote(c);
  const { affected } = await dialect.execute(
    manager,
    `UPDATE ${dialect.quoteTable(table)} SET ${q('available_at')} = ${q('created_at')} + 1
     WHERE ${q('seq')} IN (${seqList(seqs)}) AND ${q('status')} = 'pending' AND ${q('claimed_by')} IS NULL
       AND ${q('available_at')} = ${q('created_at')}`,
    [],
    { relay: true },
  );
  return affected;
}

/**
 * Claims rows whose publish failed under `owner` (counting the attempt, as a poll's claim does), so that the
 * fenced `markFailed()` can write their retry or dead state. Resolves with the seqs claimed and their attempts.
 */
export async function claimStreamed(
  dialect: WalSqlDialect,
  manager: EntityManager,
  table: string,
  owner: string,
  seqs: readonly string[],
  leaseMs: number,
): Promise<Map<string, number>> {
  if (seqs.length === 0) return new Map();
  const q = (c: string) => dialect.quote(c);
  const { records } = await dialect.execute(
    manager,
    `UPDATE ${dialect.quoteTable(table)}
     SET ${q('claimed_by')} = $1, ${q('claimed_until')} = ${dialect.nowMs} + $2, ${q('attempts')} = ${q('attempts')} + 1
     WHERE ${q('seq')} IN (${seqList(seqs)}) AND ${q('status')} = 'pending' AND ${q('claimed_by')} IS NULL
     RETURNING ${q('seq')}, ${q('attempts')}`,
    [owner, leaseMs],
    { relay: true },
  );
  return new Map(records.map((r) => [String(r.seq), Number(r.attempts)]));
}

/**
 * The keys of `rows` that an earlier unsent row holds back: a pending or dead row of the key with a smaller `seq`
 * than the key's first row here (a failed one being retried by polling, one handed back, one written before the
 * slot). Per-key order holds: such a key's rows go to polling, which publishes them after that row.
 */
export async function heldBackKeys(
  dialect: WalSqlDialect,
  manager: EntityManager,
  table: string,
  rows: readonly ClaimedOutboxRow[],
): Promise<Set<string>> {
  const first = new Map<string, string>();
  for (const row of rows) if (row.key !== null && !first.has(row.key)) first.set(row.key, row.seq);
  if (first.size === 0) return new Set();
  const q = (c: string) => dialect.quote(c);
  const { records } = await dialect.execute(
    manager,
    `SELECT k.key FROM unnest($1::text[], $2::bigint[]) AS k(key, first)
     WHERE EXISTS (
       SELECT 1 FROM ${dialect.quoteTable(table)} e
       WHERE e.${q('ordering_key')} = k.key AND e.${q('status')} IN ('pending', 'dead') AND e.${q('seq')} < k.first
     )`,
    [[...first.keys()], [...first.values()]],
    { relay: true },
  );
  return new Set(records.map((r) => String(r.key)));
}

/**
 * Of the streamed rows `seqs`: those still the stream's (`open`: pending, never attempted, unclaimed), and those
 * found at all (`found`). A found row that is not open was handled meanwhile — polled while no reader streamed (the
 * slot then replays it), retried, dead — and is skipped. A row not found was deleted, or its commit is not visible
 * yet: PostgreSQL writes the commit record (which the stream sends) a moment before other sessions see the
 * transaction, so the caller asks again before treating it as deleted.
 */
export async function streamedRowStates(
  dialect: WalSqlDialect,
  manager: EntityManager,
  table: string,
  seqs: readonly string[],
): Promise<{ open: Set<string>; found: Set<string> }> {
  const open = new Set<string>();
  const found = new Set<string>();
  if (seqs.length === 0) return { open, found };
  const q = (c: string) => dialect.quote(c);
  const { records } = await dialect.execute(
    manager,
    `SELECT ${q('seq')}, (${q('status')} = 'pending' AND ${q('attempts')} = 0 AND ${q('claimed_by')} IS NULL) AS open
     FROM ${dialect.quoteTable(table)} WHERE ${q('seq')} IN (${seqList(seqs)})`,
    [],
    { relay: true },
  );
  for (const r of records) {
    found.add(String(r.seq));
    if (r.open === true) open.add(String(r.seq));
  }
  return { open, found };
}
