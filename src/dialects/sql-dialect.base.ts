import type { EntityManager } from 'typeorm';
import { replaceDeadRows } from './dead-letter-edit.sql';
import { type FirstFailure, insertFailedRow } from './inbox-row.sql';
import type {
  AttemptHistoryOptions,
  ClaimedOutboxRow,
  DeadReplacement,
  NewOutboxRow,
  OutboxDialect,
  OutboxStats,
  ReplacedRow,
} from './outbox-dialect';
import { SqlCompletionDialect } from './sql-dialect.completion';
import { checkedSeq } from './sql-dialect.core';

export { checkedMs, checkedSeq, SqlDialectCore } from './sql-dialect.core';
export type { ExecuteOptions, StatementResult, UniqueIndexRef } from './sql-dialect.core';

/**
 * SQL that is the same on every supported database, written once against `quote()`, `param()` and `nowMs`.
 * The dialects add what differs: the claim, the clock and the error codes. Built in layers, one file each: the
 * statements and inserts (`sql-dialect.core.ts`), the dead letters (`sql-dialect.dead-letters.ts`), the relay's
 * completion writes (`sql-dialect.completion.ts`); this last one holds the parts every claim is built from, the
 * stats and the cleanup.
 */
export abstract class SqlOutboxDialect extends SqlCompletionDialect implements OutboxDialect {
  insertFailed(
    manager: EntityManager,
    table: string,
    row: NewOutboxRow & { destination: string },
    failure: FirstFailure,
    history: AttemptHistoryOptions,
  ): Promise<void> {
    return insertFailedRow(this, manager, table, row, failure, history);
  }

  replaceDead(manager: EntityManager, table: string, replacement: DeadReplacement): Promise<ReplacedRow[]> {
    return replaceDeadRows(this, manager, table, this.lockRowsClause, replacement);
  }

  async stats(manager: EntityManager, table: string): Promise<OutboxStats> {
    const q = (c: string) => this.quote(c);
    const now = this.nowMs;
    const { records } = await this.execute(
      manager,
      `SELECT
         SUM(CASE WHEN ${q('status')} = 'pending' THEN 1 ELSE 0 END) AS ${q('pending')},
         SUM(CASE
               WHEN ${q('status')} = 'pending' AND ${q('available_at')} <= ${now}
                 AND (${q('claimed_until')} IS NULL OR ${q('claimed_until')} < ${now})
               THEN 1 ELSE 0 END) AS ${q('due')},
         SUM(CASE WHEN ${q('status')} = 'pending' AND ${q('claimed_until')} >= ${now} THEN 1 ELSE 0 END)
           AS ${q('in_flight')},
         SUM(CASE WHEN ${q('status')} = 'dead' THEN 1 ELSE 0 END) AS ${q('dead')},
         MIN(CASE WHEN ${q('status')} = 'pending' THEN ${q('created_at')} END) AS ${q('oldest')},
         ${now} AS ${q('now')}
       FROM ${this.quoteTable(table)}
       WHERE ${q('status')} IN ('pending', 'dead')`,
    );
    const r = records[0] ?? {};
    const oldest = r.oldest === null || r.oldest === undefined ? undefined : Number(r.oldest);
    return {
      pending: Number(r.pending ?? 0),
      due: Number(r.due ?? 0),
      inFlight: Number(r.in_flight ?? 0),
      dead: Number(r.dead ?? 0),
      oldestPendingAgeMs: oldest === undefined ? 0 : Math.max(0, Number(r.now) - oldest),
    };
  }

  async deleteExpiredSent(manager: EntityManager, table: string, retentionMs: number, limit: number): Promise<number> {
    const q = (c: string) => this.quote(c);
    return this.inTransaction(manager, async (tx) => {
      const { records } = await this.execute(
        tx,
        `
          SELECT ${q('seq')}
          FROM ${this.quoteTable(table)}
          WHERE ${q('status')} = 'sent' AND ${q('sent_at')} < ${this.nowMs} - ${Math.max(0, Math.floor(retentionMs))}
          ORDER BY ${q('sent_at')}
          LIMIT ${Math.max(1, Math.floor(limit))}
          ${this.skipLockedClause}`,
      );
      if (records.length === 0) return 0;
      const { affected } = await this.execute(
        tx,
        `
          DELETE FROM ${this.quoteTable(table)}
          WHERE ${q('seq')} IN (${records.map((r) => checkedSeq(String(r.seq))).join(', ')})`,
      );
      return affected;
    });
  }

  /** Row-locking clause that skips rows other transactions hold (empty where there is one writer). */
  protected readonly skipLockedClause: string = 'FOR UPDATE SKIP LOCKED';

  /** Maps a claimed record (snake_case columns) to the publisher's shape. */
  protected toClaimed(record: any): ClaimedOutboxRow {
    return {
      seq: String(record.seq),
      messageId: record.message_id,
      pattern: record.pattern,
      payload: record.payload,
      headers: record.headers ?? null,
      key: record.ordering_key ?? null,
      destination: record.destination ?? '',
      attempts: Number(record.attempts),
      ...(record.age_ms === undefined || record.age_ms === null ? {} : { ageMs: Math.max(0, Number(record.age_ms)) }),
      ...(record.expires_in_ms === undefined || record.expires_in_ms === null
        ? {}
        : { expiresInMs: Number(record.expires_in_ms) }),
    };
  }

  /**
   * The claimed row's age on the database clock (now − `created_at`, in ms), as the column `age_ms` of a claim's
   * result: the publisher adds the time to the broker's confirmation to report the commit-to-publish delay. And
   * the time it has left before it expires (`expires_at` − now, `NULL` for a row without expiry), as
   * `expires_in_ms`: the publisher publishes no row whose time is up (see `OutboxMessageExpiredError`).
   */
  protected claimedAge(alias?: string): string {
    const column = (c: string) => (alias ? `${alias}.${this.quote(c)}` : this.quote(c));
    return (
      `${this.nowMs} - ${column('created_at')} AS ${this.quote('age_ms')}, ` +
      `${column('expires_at')} - ${this.nowMs} AS ${this.quote('expires_in_ms')}`
    );
  }

  /**
   * The condition that the earlier row of alias `e` (no alias: the statement's own table) holds back nothing of its
   * key: it expired on the database clock and no publisher holds it. Such a row is never published — it is dead
   * (reason expired) or about to be — so the next row of its key may go.
   */
  protected expiredUnheld(e?: string): string {
    const c = (name: string) => (e ? `${e}.${this.quote(name)}` : this.quote(name));
    const now = this.nowMs;
    return (
      `(${c('expires_at')} IS NOT NULL AND ${c('expires_at')} <= ${now} ` +
      `AND (${c('claimed_until')} IS NULL OR ${c('claimed_until')} < ${now}))`
    );
  }

  /**
   * The condition that the row of alias `e` is in the same ordered stream as the row of alias `m` (the same key
   * is checked apart): the same destination, or either is `''` (every destination of its message, so in every
   * stream of its key). A key's order so holds per destination, and a destination that is down holds back only
   * its own rows.
   */
  protected sameDestination(e: string, m: string): string {
    const d = this.quote('destination');
    return `(${e}.${d} = ${m}.${d} OR ${e}.${d} = '' OR ${m}.${d} = '')`;
  }

  /**
   * The condition that the earlier unsent row `e` of `m`'s key holds `m` back: in `m`'s stream (see
   * `sameDestination()`) and in `state` (dead, not due, or claimed elsewhere) — or a row for every destination
   * (`''`) while `m` is for one, whatever its state: `e` may itself wait for a row of another destination, which
   * would not hold `m` back, so a one-destination row waits until the earlier every-destination rows of its key
   * are sent (such rows are those written before the destinations migration).
   */
  protected heldBackBy(e: string, m: string, state: string): string {
    const d = this.quote('destination');
    return `(${e}.${d} = '' AND ${m}.${d} <> '' OR (${e}.${d} = ${m}.${d} OR ${m}.${d} = '') AND ${state})`;
  }

  /**
   * The WHERE clause of rows that may be claimed now (columns of the alias `m`): pending, due, unclaimed (or lease
   * expired), and — for keyed rows — not behind an earlier row of the same key and destination that cannot be
   * published now (dead, waiting for a retry, or claimed by another publisher) and not expired (`expiredUnheld()`).
   * A failing head so blocks only its own key at its own destination, and an expired one blocks nothing.
   */
  protected claimableWhere(table: string, m = 'm'): string {
    const q = (c: string) => this.quote(c);
    const now = this.nowMs;
    const until = `${m}.${q('claimed_until')}`;
    return `${this.pendingCondition(m)}
      AND ${m}.${q('available_at')} <= ${now} AND (${until} IS NULL OR ${until} < ${now})
      AND (${m}.${q('ordering_key')} IS NULL OR NOT EXISTS (
        SELECT 1
        FROM ${this.quoteTable(table)} e
        WHERE e.${q('ordering_key')} = ${m}.${q('ordering_key')}
          AND e.${q('status')} IN ('pending', 'dead') AND e.${q('seq')} < ${m}.${q('seq')}
          AND NOT ${this.expiredUnheld('e')}
          AND ${this.heldBackBy('e', m, `(e.${q('status')} = 'dead' OR e.${q('available_at')} > ${now} OR e.${q('claimed_until')} >= ${now})`)}
      ))`;
  }

  /** The claim's condition on the status of the rows of alias `m`: pending. */
  protected pendingCondition(m: string): string {
    return `${m}.${this.quote('status')} = 'pending'`;
  }

  /**
   * Of the rows this claim locked, keeps only the keyed ones with no earlier unsent row of their key and destination
   * (see `sameDestination()`) outside the locked set (such a row is held by a concurrent claim that has not
   * committed yet). Returns the kept seqs.
   */
  protected async keepKeyPrefixes(
    tx: EntityManager,
    table: string,
    locked: ReadonlyArray<{ seq: string; key: string | null; destination: string }>,
  ): Promise<Set<string>> {
    const keep = new Set(locked.map((r) => r.seq));
    const keys = [...new Set(locked.map((r) => r.key).filter((k): k is string => k !== null))];
    if (keys.length === 0) return keep;
    const q = (c: string) => this.quote(c);
    const params = [...keys];
    const { records } = await this.execute(
      tx,
      `
        SELECT ${q('ordering_key')} AS ${q('k')}, ${q('destination')} AS ${q('d')}, MIN(${q('seq')}) AS ${q('first')}
        FROM ${this.quoteTable(table)}
        WHERE ${q('ordering_key')} IN (${keys.map((_, i) => this.param(i + 1)).join(', ')})
          AND ${q('status')} IN ('pending', 'dead') AND NOT ${this.expiredUnheld()}
          AND ${q('seq')} NOT IN (${locked.map((r) => checkedSeq(r.seq)).join(', ')})
        GROUP BY ${q('ordering_key')}, ${q('destination')}`,
      params,
    );
    // Per key: the first blocking row of each destination.
    const firstBlockers = new Map<string, Array<{ destination: string; first: bigint }>>();
    for (const r of records) {
      const list = firstBlockers.get(String(r.k)) ?? [];
      list.push({ destination: String(r.d ?? ''), first: BigInt(String(r.first)) });
      firstBlockers.set(String(r.k), list);
    }
    for (const row of locked) {
      const blockers = row.key === null ? undefined : firstBlockers.get(row.key);
      if (!blockers) continue;
      const seq = BigInt(row.seq);
      const blocked = blockers.some(
        (b) => b.first < seq && (b.destination === row.destination || b.destination === '' || row.destination === ''),
      );
      if (blocked) keep.delete(row.seq);
    }
    return keep;
  }

  protected readonly claimedColumns = [
    'seq',
    'message_id',
    'pattern',
    'payload',
    'headers',
    'ordering_key',
    'destination',
    'attempts',
  ];
}
