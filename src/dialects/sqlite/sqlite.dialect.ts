import type { EntityManager } from 'typeorm';
import type { ClaimedOutboxRow, ClaimRequest } from '../outbox-dialect';
import { SqlOutboxDialect, UniqueIndexRef } from '../sql-dialect.base';

/**
 * SQLite (better-sqlite3): one writer at a time, so the claim is a single `UPDATE … RETURNING` with no locking
 * clause; transactions of a DataSource are serialized by the transaction runner. Unique violations name the
 * columns, not the index.
 */
export class SqliteOutboxDialect extends SqlOutboxDialect {
  readonly name = 'sqlite' as const;
  readonly nowMs = `CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)`;

  quote(identifier: string): string {
    return `"${identifier.replace(/"/g, '""')}"`;
  }

  /**
   * SQLITE_MAX_VARIABLE_NUMBER, 32,766 since SQLite 3.32 and in better-sqlite3 12 (32,767 fails with "too many SQL
   * variables").
   */
  readonly maxBindParameters = 32_766;

  param(): string {
    return '?';
  }

  async claim(manager: EntityManager, { table, owner, limit, leaseMs }: ClaimRequest): Promise<ClaimedOutboxRow[]> {
    const q = (c: string) => this.quote(c);
    const { records } = await this.execute(
      manager,
      `UPDATE ${this.quoteTable(table)}
       SET ${q('claimed_by')} = ?, ${q('claimed_until')} = ${this.nowMs} + ?, ${q('attempts')} = ${q('attempts')} + 1
       WHERE ${q('seq')} IN (
         SELECT m.${q('seq')}
         FROM ${this.quoteTable(table)} m
         WHERE ${this.claimableWhere(table)}
         ORDER BY m.${q('seq')}
         LIMIT ${Math.floor(limit)}
       )
       RETURNING ${this.claimedColumns.map(q).join(', ')}, ${this.claimedAge()}`,
      [owner, leaseMs],
    );
    return records.map((r) => this.toClaimed(r)).sort((a, b) => Number(BigInt(a.seq) - BigInt(b.seq)));
  }

  /** `pragma_table_info` (the table-valued form of `PRAGMA table_info`): reads the schema, no row of the table. */
  async tableColumns(manager: EntityManager, table: string): Promise<string[]> {
    const { schema, name } = this.splitTablePath(table);
    const { records } = await this.execute(
      manager,
      schema === null ? 'SELECT name FROM pragma_table_info(?)' : 'SELECT name FROM pragma_table_info(?, ?)',
      schema === null ? [name] : [name, schema],
    );
    return records.map((r) => String(r.name));
  }

  /** One writer at a time: nothing to skip. */
  protected readonly skipLockedClause = '';

  /** One writer at a time: a transaction's reads need no lock. */
  protected readonly lockRowsClause = '';

  protected uniqueViolationDetails(error: any) {
    const code = String(error?.code ?? '');
    const message = String(error?.message ?? '');
    if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY')
      return { code: true, text: message };
    if (code === 'SQLITE_CONSTRAINT' && /UNIQUE constraint failed/i.test(message)) return { code: true, text: message };
    return undefined;
  }

  protected matchesIndex(text: string, index: UniqueIndexRef): boolean {
    if (index.columns.length === 0) return text.includes(index.name);
    const failed = text
      .replace(/^.*UNIQUE constraint failed:\s*/i, '')
      .split(',')
      .map((s) => s.trim());
    const expected = index.columns.map((c) => `${index.table}.${c}`);
    return failed.length === expected.length && expected.every((c) => failed.includes(c));
  }
}
