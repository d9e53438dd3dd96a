import type { EntityManager } from 'typeorm';
import type {
  AttemptHistoryOptions,
  ClaimedOutboxRow,
  OutboxDialect,
  OutboxFailure,
  OutboxStats,
} from './outbox-dialect';
import { redactSecrets } from '../util/redact-secrets';
import { writeAttemptHistory } from './attempt-history.sql';
import { SqlDeadLetterDialect } from './sql-dialect.dead-letters';
import { checkedSeq } from './sql-dialect.core';

export { checkedMs, checkedSeq, SqlDialectCore } from './sql-dialect.core';
export type { ExecuteOptions, StatementResult, UniqueIndexRef } from './sql-dialect.core';

/**
 * SQL that is the same on every supported database, written once against `quote()`, `param()` and `nowMs`.
 * The dialects add what differs: the claim, the clock and the error codes. This layer holds the relay's
 * completion writes (sent, failed with its attempt history, released, deleted), the stats and the cleanup.
 */
export abstract class SqlOutboxDialect extends SqlDeadLetterDialect implements OutboxDialect {
  async deleteSent(manager: EntityManager, table: string, owner: string, seqs: readonly string[]): Promise<number> {
    if (seqs.length === 0) return 0;
    const q = (c: string) => this.quote(c);
    const { affected } = await this.execute(
      manager,
      `
        DELETE FROM ${this.quoteTable(table)}
        WHERE ${q('claimed_by')} = ${this.param(1)} AND ${q('seq')} IN (${seqs.map(checkedSeq).join(', ')})`,
      [owner],
      { relay: true },
    );
    return affected;
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

  async markSent(manager: EntityManager, table: string, owner: string, seqs: readonly string[]): Promise<number> {
    if (seqs.length === 0) return 0;
    const q = (c: string) => this.quote(c);
    const { affected } = await this.execute(
      manager,
      `
        UPDATE ${this.quoteTable(table)}
        SET ${q('status')} = 'sent', ${q('sent_at')} = ${this.nowMs}, ${q('claimed_by')} = NULL,
          ${q('claimed_until')} = NULL, ${q('last_error')} = NULL
        WHERE ${q('claimed_by')} = ${this.param(1)} AND ${q('seq')} IN (${seqs.map(checkedSeq).join(', ')})`,
      [owner],
      { relay: true },
    );
    return affected;
  }

  async markFailed(
    manager: EntityManager,
    table: string,
    owner: string,
    failures: readonly OutboxFailure[],
    history?: AttemptHistoryOptions,
  ): Promise<number> {
    if (failures.length === 0) return 0;
    if (!history || history.limit <= 0) return this.updateFailed(manager, table, owner, failures);
    const q = (c: string) => this.quote(c);
    return this.inTransaction(manager, async (tx) => {
      // Lock the rows this claim still holds, so the update and the history cover exactly the same rows.
      const { records } = await this.execute(
        tx,
        `SELECT ${q('seq')}, ${q('attempts')} FROM ${this.quoteTable(table)} ` +
          `WHERE ${q('claimed_by')} = ${this.param(1)} ` +
          `AND ${q('seq')} IN (${failures.map((f) => checkedSeq(f.seq)).join(', ')}) ${this.lockRowsClause}`,
        [owner],
      );
      const held = new Map(records.map((r) => [String(r.seq), Number(r.attempts)]));
      const mine = failures.filter((f) => held.has(f.seq));
      if (mine.length === 0) return 0;
      const changed = await this.updateFailed(tx, table, owner, mine);
      await this.recordAttempts(tx, table, owner, mine, held, history);
      return changed;
    });
  }

  /** Appends one attempt row per failure, then keeps the newest `history.limit` of each: `writeAttemptHistory()`. */
  protected async recordAttempts(
    tx: EntityManager,
    table: string,
    owner: string,
    failures: readonly OutboxFailure[],
    attempts: ReadonlyMap<string, number>,
    history: AttemptHistoryOptions,
  ): Promise<void> {
    await writeAttemptHistory(this, tx, table, { owner, failures, attempts, history });
  }

  /** Locks the rows a SELECT read until the transaction ends (empty where there is one writer). */
  protected readonly lockRowsClause: string = 'FOR UPDATE';

  /** The fenced UPDATE of `markFailed()`: retry or dead (with `dead_at`), error, claim cleared. */
  protected async updateFailed(
    manager: EntityManager,
    table: string,
    owner: string,
    failures: readonly OutboxFailure[],
  ): Promise<number> {
    const q = (c: string) => this.quote(c);
    // Placeholders are positional on MySQL and SQLite: push parameters in the order they appear in the text.
    const params: unknown[] = [];
    const p = (value: unknown) => {
      params.push(value);
      return this.param(params.length);
    };
    const delayCases = failures
      .map((f) => `WHEN ${checkedSeq(f.seq)} THEN ${Math.max(0, Math.floor(f.retryDelay))}`)
      .join(' ');
    const errorCases = failures
      .map((f) => `WHEN ${checkedSeq(f.seq)} THEN ${p(redactSecrets(f.error).slice(0, 4000))}`)
      .join(' ');
    const dead = failures.filter((f) => f.dead).map((f) => f.seq);
    const statusExpr = dead.length
      ? `CASE WHEN ${q('seq')} IN (${dead.join(', ')}) THEN 'dead' ELSE 'pending' END`
      : `'pending'`;
    const deadAtExpr = dead.length
      ? `, ${q('dead_at')} = CASE WHEN ${q('seq')} IN (${dead.join(', ')}) THEN ${this.nowMs} ELSE ${q('dead_at')} END`
      : '';
    // An unreachable broker gives back the attempt its claim counted (never below 0).
    const uncounted = failures.filter((f) => f.transportUnreachable && !f.dead).map((f) => f.seq);
    const attempts = q('attempts');
    const attemptsExpr = uncounted.length
      ? `, ${attempts} = CASE WHEN ${q('seq')} IN (${uncounted.join(', ')}) AND ${attempts} > 0 ` +
        `THEN ${attempts} - 1 ELSE ${attempts} END`
      : '';
    const { affected } = await this.execute(
      manager,
      `
        UPDATE ${this.quoteTable(table)}
        SET ${q('status')} = ${statusExpr}${deadAtExpr}${attemptsExpr},
          ${q('available_at')} = ${this.nowMs} + CASE ${q('seq')} ${delayCases} ELSE 0 END,
          ${q('last_error')} = CASE ${q('seq')} ${errorCases} ELSE ${q('last_error')} END,
          ${q('claimed_by')} = NULL, ${q('claimed_until')} = NULL
        WHERE ${q('claimed_by')} = ${p(owner)} AND ${q('seq')} IN (${failures.map((f) => f.seq).join(', ')})`,
      params,
      { relay: true },
    );
    return affected;
  }

  async extendLease(
    manager: EntityManager,
    table: string,
    owner: string,
    seqs: readonly string[],
    leaseMs: number,
  ): Promise<number> {
    if (seqs.length === 0) return 0;
    const q = (c: string) => this.quote(c);
    const { affected } = await this.execute(
      manager,
      `
        UPDATE ${this.quoteTable(table)}
        SET ${q('claimed_until')} = ${this.nowMs} + ${Math.max(1, Math.floor(leaseMs))}
        WHERE ${q('claimed_by')} = ${this.param(1)} AND ${q('seq')} IN (${seqs.map(checkedSeq).join(', ')})`,
      [owner],
      { relay: true },
    );
    return affected;
  }

  async release(manager: EntityManager, table: string, owner: string, seqs: readonly string[]): Promise<number> {
    if (seqs.length === 0) return 0;
    const q = (c: string) => this.quote(c);
    const { affected } = await this.execute(
      manager,
      `
        UPDATE ${this.quoteTable(table)}
        SET ${q('claimed_by')} = NULL, ${q('claimed_until')} = NULL, ${q('attempts')} = ${q('attempts')} - 1
        WHERE ${q('claimed_by')} = ${this.param(1)} AND ${q('seq')} IN (${seqs.map(checkedSeq).join(', ')})`,
      [owner],
      { relay: true },
    );
    return affected;
  }

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
    };
  }

  /**
   * The claimed row's age on the database clock (now − `created_at`, in ms), as the column `age_ms` of a claim's
   * result: the publisher adds the time to the broker's confirmation to report the commit-to-publish delay.
   */
  protected claimedAge(alias?: string): string {
    const column = alias ? `${alias}.${this.quote('created_at')}` : this.quote('created_at');
    return `${this.nowMs} - ${column} AS ${this.quote('age_ms')}`;
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
   * published now (dead, waiting for a retry, or claimed by another publisher). A failing head so blocks only its
   * own key at its own destination.
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
          AND ${q('status')} IN ('pending', 'dead')
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
