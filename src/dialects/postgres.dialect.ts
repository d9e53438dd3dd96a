import type { EntityManager } from 'typeorm';
import type { ClaimedOutboxRow, ClaimRequest } from './outbox-dialect';
import { SqlOutboxDialect } from './sql-dialect.base';

/** PostgreSQL: claim with `FOR UPDATE SKIP LOCKED` in one `UPDATE … RETURNING`; unique violations are `23505`. */
export class PostgresOutboxDialect extends SqlOutboxDialect {
  readonly name = 'postgres' as const;
  readonly nowMs = `(extract(epoch from clock_timestamp()) * 1000)::bigint`;

  quote(identifier: string): string {
    return `"${identifier.replace(/"/g, '""')}"`;
  }

  param(index: number): string {
    return `$${index}`;
  }

  async claim(manager: EntityManager, { table, owner, limit, leaseMs }: ClaimRequest): Promise<ClaimedOutboxRow[]> {
    const q = (c: string) => this.quote(c);
    const { records } = await this.execute(
      manager,
      `WITH c AS (SELECT ${q('seq')} FROM ${this.quoteTable(table)} WHERE ${this.claimableWhere()} ORDER BY ${q('seq')} LIMIT $2 FOR UPDATE SKIP LOCKED)
       UPDATE ${this.quoteTable(table)} m SET ${q('claimed_by')} = $1, ${q('claimed_until')} = ${this.nowMs} + $3, ${q('attempts')} = m.${q('attempts')} + 1
       FROM c WHERE m.${q('seq')} = c.${q('seq')}
       RETURNING ${this.claimedColumns.map((c) => `m.${q(c)}`).join(', ')}`,
      [owner, limit, leaseMs],
    );
    return records.map((r) => this.toClaimed(r)).sort((a, b) => Number(BigInt(a.seq) - BigInt(b.seq)));
  }

  protected uniqueViolationDetails(error: any) {
    if (error?.code !== '23505') return undefined;
    return { code: true, text: `${error.constraint ?? ''} ${error.message ?? ''}` };
  }
}
