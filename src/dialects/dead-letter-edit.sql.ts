import type { EntityManager } from 'typeorm';
import { outboxAttemptsTable } from '../schema/outbox-attempt.entity';
import type { DeadReplacement, ReplacedRow } from './outbox-dialect';
import { checkedSeq, type SqlDialectCore } from './sql-dialect.core';

/** The columns a replaced row keeps from the dead row it was (everything but `seq`, the claim and `sent_at`). */
const KEPT = [
  'pattern',
  'ordering_key',
  'destination',
  'attempts',
  'available_at',
  'expires_at',
  'created_at',
  'dead_at',
  'cause_scope',
  'cause_key',
  'last_error',
] as const;

/**
 * Replaces dead rows by a corrected copy, in SQL that is the same on every supported database, in the caller's
 * transaction `tx`:
 *
 * 1. the rows are read and locked (`lockRows`: `FOR UPDATE`, empty on SQLite's single writer) — only those still
 *    `dead` with the original id; fewer than asked (a concurrent edit, requeue or purge won) changes nothing and
 *    resolves with `[]`;
 * 2. each row becomes the copy in place (its `seq`, so its place in its key's order, is kept): the new id, payload
 *    and headers, pending and due now, attempts and error cleared — an UPDATE conditional on `status = 'dead'` and
 *    the original id, so of two transactions only one can change it;
 * 3. the original is written back as a new row with status `replaced`, its own id, payload, headers, attempts,
 *    error and times, and the audit `audit(now)` (now: the database clock);
 * 4. its attempt history moves to that row.
 */
export async function replaceDeadRows(
  dialect: SqlDialectCore,
  tx: EntityManager,
  table: string,
  lockRows: string,
  r: DeadReplacement,
): Promise<ReplacedRow[]> {
  const q = (c: string) => dialect.quote(c);
  const t = dialect.quoteTable(table);
  const seqs = r.seqs.map(checkedSeq);
  if (seqs.length === 0) return [];
  const columns = ['seq', 'message_id', 'payload', 'headers', ...KEPT];
  const { records } = await dialect.execute(
    tx,
    `SELECT ${columns.map(q).join(', ')}, ${dialect.nowMs} AS ${q('now_ms')} FROM ${t} ` +
      `WHERE ${q('seq')} IN (${seqs.join(', ')}) AND ${q('status')} = 'dead' AND ${q('message_id')} = ` +
      `${dialect.param(1)} ORDER BY ${q('seq')} ${lockRows}`,
    [r.messageId],
  );
  if (records.length !== seqs.length) return [];
  const now = Number(records[0].now_ms);
  const { affected } = await dialect.execute(
    tx,
    `UPDATE ${t} SET ${q('message_id')} = ${dialect.param(1)}, ${q('payload')} = ${dialect.param(2)}, ` +
      `${q('headers')} = ${dialect.param(3)}, ${q('status')} = 'pending', ${q('attempts')} = 0, ` +
      `${q('available_at')} = ${dialect.nowMs}, ${q('dead_at')} = 0, ${q('last_error')} = NULL, ` +
      `${q('claimed_by')} = NULL, ${q('claimed_until')} = NULL ` +
      `WHERE ${q('seq')} IN (${seqs.join(', ')}) AND ${q('status')} = 'dead' AND ${q('message_id')} = ${dialect.param(4)}`,
    [r.newMessageId, r.payload, r.headers, r.messageId],
  );
  if (affected !== seqs.length) throw new Error(`Replaced ${affected} of ${seqs.length} locked dead rows`);
  const audit = r.audit(now);
  const replaced: ReplacedRow[] = [];
  const inserted = ['message_id', 'payload', 'headers', 'status', 'edit_audit', ...KEPT];
  for (const row of records) {
    const params = [row.message_id, row.payload, row.headers, 'replaced', audit, ...KEPT.map((c) => row[c])];
    const values = params.map((_, i) => dialect.param(i + 1)).join(', ');
    await dialect.execute(tx, `INSERT INTO ${t} (${inserted.map(q).join(', ')}) VALUES (${values})`, params);
    const { records: found } = await dialect.execute(
      tx,
      `SELECT ${q('seq')} FROM ${t} WHERE ${q('message_id')} = ${dialect.param(1)} AND ` +
        `${q('destination')} = ${dialect.param(2)}`,
      [row.message_id, row.destination],
    );
    const archived = checkedSeq(String(found[0]?.seq));
    await dialect.execute(
      tx,
      `UPDATE ${dialect.quoteTable(outboxAttemptsTable(table))} SET ${q('message_seq')} = ${archived} ` +
        `WHERE ${q('message_seq')} = ${checkedSeq(String(row.seq))}`,
    );
    replaced.push({ seq: String(row.seq), replacedSeq: archived, destination: String(row.destination) });
  }
  return replaced;
}
