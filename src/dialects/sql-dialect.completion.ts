import type { EntityManager } from 'typeorm';
import { redactSecrets } from '../util/redact-secrets';
import { writeAttemptHistory } from './attempt-history.sql';
import type { AttemptHistoryOptions, OutboxFailure } from './outbox-dialect';
import { checkedSeq } from './sql-dialect.core';
import { SqlDeadLetterDialect } from './sql-dialect.dead-letters';

/**
 * The relay's completion writes, the same on every supported database: a claimed batch's rows marked sent (or
 * deleted), failed (rescheduled or dead, with their attempt history), released unstarted, or their lease extended.
 * Every statement is fenced by the claim's owner token and resolves with the number of rows it changed.
 */
export abstract class SqlCompletionDialect extends SqlDeadLetterDialect {
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
}
