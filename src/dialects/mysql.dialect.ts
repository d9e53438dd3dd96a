import type { EntityManager } from 'typeorm';
import type { ClaimedOutboxRow, ClaimRequest } from './outbox-dialect';
import { SqlOutboxDialect } from './sql-dialect.base';

/**
 * MySQL 8 and MariaDB 10.6+: claim with `SELECT … FOR UPDATE SKIP LOCKED` then `UPDATE` in one transaction;
 * the clock is UTC microseconds (independent of the session time zone); unique violations are `ER_DUP_ENTRY`.
 */
export class MysqlOutboxDialect extends SqlOutboxDialect {
  readonly name = 'mysql' as const;
  readonly nowMs = `(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)`;

  quote(identifier: string): string {
    return `\`${identifier.replace(/`/g, '``')}\``;
  }

  param(): string {
    return '?';
  }

  async claim(manager: EntityManager, { table, owner, limit, leaseMs }: ClaimRequest): Promise<ClaimedOutboxRow[]> {
    const q = (c: string) => this.quote(c);
    const work = async (tx: EntityManager) => {
      const { records } = await this.execute(
        tx,
        `SELECT ${this.claimedColumns.map(q).join(', ')} FROM ${this.quoteTable(table)} WHERE ${this.claimableWhere()} ORDER BY ${q('seq')} LIMIT ${Math.floor(limit)} FOR UPDATE SKIP LOCKED`,
      );
      if (records.length === 0) return [];
      const rows = records.map((r) => this.toClaimed(r));
      await this.execute(
        tx,
        `UPDATE ${this.quoteTable(table)} SET ${q('claimed_by')} = ?, ${q('claimed_until')} = ${this.nowMs} + ?, ${q('attempts')} = ${q('attempts')} + 1 WHERE ${q('seq')} IN (${rows.map((r) => r.seq).join(', ')})`,
        [owner, leaseMs],
      );
      for (const row of rows) row.attempts += 1;
      return rows;
    };
    return manager.queryRunner?.isTransactionActive ? work(manager) : manager.transaction(work);
  }

  protected uniqueViolationDetails(error: any) {
    if (error?.code !== 'ER_DUP_ENTRY' && error?.errno !== 1062) return undefined;
    return { code: true, text: `${error.sqlMessage ?? error.message ?? ''}` };
  }
}
