import type { EntityManager } from 'typeorm';
import { outboxAttemptsTable } from '../schema/outbox-attempt.entity';
import { redactSecrets } from '../util/redact-secrets';
import type { AttemptHistoryOptions, OutboxFailure } from './outbox-dialect';
import { checkedSeq, INSERT_CHUNK, type SqlDialectCore } from './sql-dialect.core';

/** The failed attempts of one claim, as `writeAttemptHistory()` records them. */
export interface FailedAttempts {
  /** The claim's owner token, recorded with each attempt. */
  owner: string;
  /** The failures of rows the claim still holds (their rows locked by the caller). */
  failures: readonly OutboxFailure[];
  /** Each row's `attempts` column at the failure, by `seq`: the attempt's number (0 when missing). */
  attempts: ReadonlyMap<string, number>;
  /** The publisher recorded with each attempt, and how many attempts of a message are kept (the newest). */
  history: AttemptHistoryOptions;
}

/**
 * Writes the attempt history of failed rows in SQL, the same on every supported database: appends one attempt row
 * per failure to the outbox's attempts table, then keeps only the newest `history.limit` of each message. Runs in
 * the caller's transaction `tx`, which holds the rows' locks.
 */
export async function writeAttemptHistory(
  dialect: SqlDialectCore,
  tx: EntityManager,
  table: string,
  { owner, failures, attempts, history }: FailedAttempts,
): Promise<void> {
  const q = (c: string) => dialect.quote(c);
  const attemptsTable = dialect.quoteTable(outboxAttemptsTable(table));
  const columns = ['message_seq', 'attempt', 'failed_at', 'counted', 'error', 'owner', 'publisher'];
  for (let start = 0; start < failures.length; start += INSERT_CHUNK) {
    const params: unknown[] = [];
    const p = (value: unknown) => {
      params.push(value);
      return dialect.param(params.length);
    };
    const values = failures.slice(start, start + INSERT_CHUNK).map((f) => {
      const counted = f.transportUnreachable && !f.dead ? 0 : 1;
      const error = p(redactSecrets(f.error).slice(0, 4000));
      const who = `${p(owner)}, ${p(history.publisher)}`;
      return `(${checkedSeq(f.seq)}, ${attempts.get(f.seq) ?? 0}, ${dialect.nowMs}, ${counted}, ${error}, ${who})`;
    });
    const insert = `INSERT INTO ${attemptsTable} (${columns.map(q).join(', ')}) VALUES ${values.join(', ')}`;
    await dialect.execute(tx, insert, params);
  }
  const seqs = failures.map((f) => checkedSeq(f.seq)).join(', ');
  // The attempts beyond the limit are read first (a plain read: only this claim writes these messages' attempts,
  // their rows being locked by the caller), then deleted by id. One `DELETE … WHERE id IN (subquery)` made MariaDB
  // scan and lock the whole attempts table, so two publishers completing different messages at once deadlocked.
  const { records: stale } = await dialect.execute(
    tx,
    `SELECT ${q('id')} FROM (SELECT ${q('id')}, ` +
      `ROW_NUMBER() OVER (PARTITION BY ${q('message_seq')} ORDER BY ${q('id')} DESC) AS ${q('rn')} ` +
      `FROM ${attemptsTable} WHERE ${q('message_seq')} IN (${seqs})) ${q('x')} ` +
      `WHERE ${q('rn')} > ${Math.floor(history.limit)}`,
  );
  if (stale.length === 0) return;
  const staleIds = stale.map((r) => checkedSeq(String(r.id))).join(', ');
  await dialect.execute(tx, `DELETE FROM ${attemptsTable} WHERE ${q('id')} IN (${staleIds})`);
}
