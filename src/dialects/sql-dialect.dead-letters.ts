import type { EntityManager } from 'typeorm';
import { outboxAttemptsTable } from '../schema/outbox-attempt.entity';
import type { AttemptRow, DeadRow, DeadRowFilter, DeadRowsQuery, DeadSelection } from './outbox-dialect';
import { checkedMs, checkedSeq, SqlDialectCore } from './sql-dialect.core';

/** The filter a selection stands for: ids, a filter, or every dead row. */
export function toDeadFilter(selection: DeadSelection): DeadRowFilter {
  if (selection === undefined) return {};
  if (Array.isArray(selection)) return { messageIds: selection };
  return selection as DeadRowFilter;
}

/** True when the filter's id or row list is given and empty: it selects nothing, and no SQL is sent. */
function selectsNothing(filter: DeadRowFilter): boolean {
  return filter.messageIds?.length === 0 || filter.seqs?.length === 0;
}

/**
 * The dead letters in SQL, the same on every supported database: list (keyset pages, newest death first), count,
 * requeue and purge by ids or filter, and a message's attempt history. Dialects adjust the index hint and the keyset.
 */
export abstract class SqlDeadLetterDialect extends SqlDialectCore {
  async requeueDead(manager: EntityManager, table: string, selection: DeadSelection): Promise<number> {
    const filter = toDeadFilter(selection);
    if (selectsNothing(filter)) return 0;
    const q = (c: string) => this.quote(c);
    const { where, params } = this.deadWhere(filter);
    const { affected } = await this.execute(
      manager,
      `UPDATE ${this.quoteTable(table)} SET ${q('status')} = 'pending', ${q('attempts')} = 0, ` +
        `${q('available_at')} = ${this.nowMs}, ${q('dead_at')} = 0, ${q('claimed_by')} = NULL, ` +
        `${q('claimed_until')} = NULL WHERE ${where}`,
      params,
    );
    return affected;
  }

  async countDeadByPattern(
    manager: EntityManager,
    table: string,
    selection: DeadSelection,
  ): Promise<Array<{ pattern: string; count: number }>> {
    const filter = toDeadFilter(selection);
    if (selectsNothing(filter)) return [];
    const q = (c: string) => this.quote(c);
    const { where, params } = this.deadWhere(filter);
    const { records } = await this.execute(
      manager,
      `SELECT ${q('pattern')} AS ${q('pattern')}, COUNT(*) AS ${q('n')} FROM ${this.quoteTable(table)} ` +
        `WHERE ${where} GROUP BY ${q('pattern')}`,
      params,
    );
    return records.map((r) => ({ pattern: String(r.pattern), count: Number(r.n) }));
  }

  async purgeDead(manager: EntityManager, table: string, selection: DeadSelection): Promise<number> {
    const filter = toDeadFilter(selection);
    if (selectsNothing(filter)) return 0;
    const { where, params } = this.deadWhere(filter);
    const { affected } = await this.execute(manager, `DELETE FROM ${this.quoteTable(table)} WHERE ${where}`, params);
    return affected;
  }

  async listDead(manager: EntityManager, table: string, { filter, after, limit }: DeadRowsQuery): Promise<DeadRow[]> {
    if (selectsNothing(filter)) return [];
    const q = (c: string) => this.quote(c);
    const { where, params } = this.deadWhere(filter);
    const keyset = after ? ` AND ${this.keysetBefore(checkedMs(after.deadAt), checkedSeq(after.seq))}` : '';
    const columns = [
      'seq',
      'message_id',
      'pattern',
      'ordering_key',
      'destination',
      'attempts',
      'created_at',
      'dead_at',
      'last_error',
    ];
    const { records } = await this.execute(
      manager,
      `SELECT ${columns.map(q).join(', ')} FROM ${this.quoteTable(table)}${this.deadIndexHint(filter, table)} ` +
        `WHERE ${where}${keyset} ` +
        `ORDER BY ${q('dead_at')} DESC, ${q('seq')} DESC LIMIT ${Math.max(1, Math.floor(limit))}`,
      params,
    );
    return records.map((r) => ({
      seq: String(r.seq),
      messageId: String(r.message_id),
      pattern: String(r.pattern),
      key: r.ordering_key ?? null,
      destination: String(r.destination ?? ''),
      attempts: Number(r.attempts),
      createdAt: Number(r.created_at),
      deadAt: Number(r.dead_at ?? 0),
      lastError: r.last_error ?? null,
    }));
  }

  async countDead(manager: EntityManager, table: string, filter: DeadRowFilter): Promise<number> {
    if (selectsNothing(filter)) return 0;
    const { where, params } = this.deadWhere(filter);
    const { records } = await this.execute(
      manager,
      `SELECT COUNT(*) AS ${this.quote('n')} FROM ${this.quoteTable(table)} WHERE ${where}`,
      params,
    );
    return Number(records[0]?.n ?? 0);
  }

  async listAttempts(manager: EntityManager, table: string, seq: string): Promise<AttemptRow[]> {
    const q = (c: string) => this.quote(c);
    const columns = ['attempt', 'failed_at', 'counted', 'error', 'owner', 'publisher'];
    const { records } = await this.execute(
      manager,
      `SELECT ${columns.map(q).join(', ')} FROM ${this.quoteTable(outboxAttemptsTable(table))} ` +
        `WHERE ${q('message_seq')} = ${checkedSeq(seq)} ORDER BY ${q('id')}`,
    );
    return records.map((r) => ({
      attempt: Number(r.attempt),
      failedAt: Number(r.failed_at),
      counted: Number(r.counted) === 1,
      error: String(r.error),
      owner: String(r.owner),
      publisher: String(r.publisher),
    }));
  }

  /**
   * The condition of dead rows matching `filter` (`status = 'dead'` first, so the dead index serves it), with its
   * parameters in order of appearance (positional on MySQL and SQLite).
   */
  protected deadWhere(filter: DeadRowFilter): { where: string; params: unknown[] } {
    const q = (c: string) => this.quote(c);
    const params: unknown[] = [];
    const p = (value: unknown) => {
      params.push(value);
      return this.param(params.length);
    };
    const parts = [`${q('status')} = 'dead'`];
    if (filter.messageIds) parts.push(`${q('message_id')} IN (${filter.messageIds.map(p).join(', ')})`);
    if (filter.seqs) parts.push(`${q('seq')} IN (${filter.seqs.map(checkedSeq).join(', ')})`);
    if (filter.pattern !== undefined) parts.push(`${q('pattern')} = ${p(filter.pattern)}`);
    if (filter.key !== undefined) parts.push(`${q('ordering_key')} = ${p(filter.key)}`);
    if (filter.destination !== undefined) parts.push(`${q('destination')} = ${p(filter.destination)}`);
    if (filter.errorContains !== undefined) {
      const escaped = filter.errorContains.toLowerCase().replace(/[!%_]/g, (c) => `!${c}`);
      parts.push(`LOWER(${q('last_error')}) LIKE ${p(`%${escaped}%`)} ESCAPE '!'`);
    }
    const range = (column: string, since: number | undefined, before: number | undefined) => {
      if (since !== undefined) parts.push(`${q(column)} >= ${checkedMs(since)}`);
      if (before !== undefined) parts.push(`${q(column)} < ${checkedMs(before)}`);
    };
    range('dead_at', filter.deadSince, filter.deadBefore);
    range('created_at', filter.createdSince, filter.createdBefore);
    return { where: parts.join(' AND '), params };
  }

  /** An index hint for `listDead()`, placed after the table name (none by default). */
  protected deadIndexHint(_filter: DeadRowFilter, _table: string): string {
    return '';
  }

  /**
   * Rows strictly after (`deadAt`, `seq`) in the newest-first order, from checked integer literals. Spelled out
   * with OR here (MySQL/MariaDB and SQLite turn it into index ranges); PostgreSQL uses a row comparison.
   */
  protected keysetBefore(deadAt: string, seq: string): string {
    const q = (c: string) => this.quote(c);
    return `(${q('dead_at')} < ${deadAt} OR (${q('dead_at')} = ${deadAt} AND ${q('seq')} < ${seq}))`;
  }
}
