import type { EntityManager } from 'typeorm';
import type {
  ClaimedOutboxRow,
  ClaimRequest,
  NewOutboxRow,
  OutboxDialect,
  OutboxFailure,
} from './outbox-dialect';

/** A unique index, described well enough for every database's error to be matched against it. */
export interface UniqueIndexRef {
  name: string;
  table: string;
  columns: readonly string[];
}

/** Result of a statement: the rows it returned and the number of rows it changed. */
export interface StatementResult {
  records: any[];
  affected: number;
}

const SEQ = /^\d+$/;

/** Checks that a sequence number is a plain integer before it is inlined into SQL. */
export function checkedSeq(seq: string): string {
  if (!SEQ.test(seq)) throw new Error(`Invalid outbox sequence number: ${JSON.stringify(seq)}`);
  return seq;
}

const INSERT_CHUNK = 500;

/**
 * SQL that is the same on every supported database, written once against `quote()`, `param()` and `nowMs`.
 * The dialects add what differs: the claim, the clock and the error codes.
 */
export abstract class SqlOutboxDialect implements OutboxDialect {
  abstract readonly name: OutboxDialect['name'];
  abstract readonly nowMs: string;
  abstract quote(identifier: string): string;
  abstract param(index: number): string;
  abstract claim(manager: EntityManager, request: ClaimRequest): Promise<ClaimedOutboxRow[]>;
  protected abstract uniqueViolationDetails(error: any): { code: boolean; text: string } | undefined;

  /** Quotes a table path such as `schema.table`. */
  quoteTable(path: string): string {
    return path
      .split('.')
      .map((part) => this.quote(part))
      .join('.');
  }

  /** Runs one statement and reports the rows it returned and changed, the same way on every driver. */
  async execute(manager: EntityManager, sql: string, params: unknown[] = []): Promise<StatementResult> {
    const own = manager.queryRunner ? undefined : manager.connection.createQueryRunner();
    const runner = manager.queryRunner ?? own!;
    try {
      const result = await runner.query(sql, params, true);
      const records = Array.isArray(result.records) ? result.records : [];
      return { records, affected: Number(result.affected ?? records.length ?? 0) };
    } finally {
      if (own) await own.release();
    }
  }

  async insert(manager: EntityManager, table: string, rows: readonly NewOutboxRow[]): Promise<void> {
    for (let start = 0; start < rows.length; start += INSERT_CHUNK) {
      const chunk = rows.slice(start, start + INSERT_CHUNK);
      const params: unknown[] = [];
      const p = (value: unknown) => {
        params.push(value);
        return this.param(params.length);
      };
      const values = chunk.map((row) => {
        // Placeholders are positional on MySQL and SQLite: push parameters in the order they appear.
        const head = `${p(row.messageId)}, ${p(row.pattern)}, ${p(row.payload)}, ${p(row.headers)}, ${p(row.key)}`;
        const due =
          row.availableAt !== undefined
            ? p(row.availableAt)
            : row.delay
              ? `${this.nowMs} + ${p(Math.floor(row.delay))}`
              : this.nowMs;
        return `(${head}, 'pending', 0, ${due}, ${this.nowMs})`;
      });
      const q = (c: string) => this.quote(c);
      await this.execute(
        manager,
        `INSERT INTO ${this.quoteTable(table)} (${q('message_id')}, ${q('pattern')}, ${q('payload')}, ${q('headers')}, ${q('ordering_key')}, ${q('status')}, ${q('attempts')}, ${q('available_at')}, ${q('created_at')}) VALUES ${values.join(', ')}`,
        params,
      );
    }
  }

  async markSent(manager: EntityManager, table: string, owner: string, seqs: readonly string[]): Promise<number> {
    if (seqs.length === 0) return 0;
    const q = (c: string) => this.quote(c);
    const { affected } = await this.execute(
      manager,
      `UPDATE ${this.quoteTable(table)} SET ${q('status')} = 'sent', ${q('sent_at')} = ${this.nowMs}, ${q('claimed_by')} = NULL, ${q('claimed_until')} = NULL, ${q('last_error')} = NULL WHERE ${q('claimed_by')} = ${this.param(1)} AND ${q('seq')} IN (${seqs.map(checkedSeq).join(', ')})`,
      [owner],
    );
    return affected;
  }

  async markFailed(manager: EntityManager, table: string, owner: string, failures: readonly OutboxFailure[]): Promise<number> {
    if (failures.length === 0) return 0;
    const q = (c: string) => this.quote(c);
    const params: unknown[] = [owner];
    const errorCases = failures
      .map((f) => {
        params.push(f.error.slice(0, 4000));
        return `WHEN ${checkedSeq(f.seq)} THEN ${this.param(params.length)}`;
      })
      .join(' ');
    const delayCases = failures.map((f) => `WHEN ${checkedSeq(f.seq)} THEN ${Math.max(0, Math.floor(f.retryDelay))}`).join(' ');
    const dead = failures.filter((f) => f.dead).map((f) => f.seq);
    const statusExpr = dead.length ? `CASE WHEN ${q('seq')} IN (${dead.join(', ')}) THEN 'dead' ELSE 'pending' END` : `'pending'`;
    const { affected } = await this.execute(
      manager,
      `UPDATE ${this.quoteTable(table)} SET ${q('status')} = ${statusExpr}, ${q('available_at')} = ${this.nowMs} + CASE ${q('seq')} ${delayCases} ELSE 0 END, ${q('last_error')} = CASE ${q('seq')} ${errorCases} ELSE ${q('last_error')} END, ${q('claimed_by')} = NULL, ${q('claimed_until')} = NULL WHERE ${q('claimed_by')} = ${this.param(1)} AND ${q('seq')} IN (${failures.map((f) => f.seq).join(', ')})`,
      params,
    );
    return affected;
  }

  async release(manager: EntityManager, table: string, owner: string, seqs: readonly string[]): Promise<number> {
    if (seqs.length === 0) return 0;
    const q = (c: string) => this.quote(c);
    const { affected } = await this.execute(
      manager,
      `UPDATE ${this.quoteTable(table)} SET ${q('claimed_by')} = NULL, ${q('claimed_until')} = NULL, ${q('attempts')} = ${q('attempts')} - 1 WHERE ${q('claimed_by')} = ${this.param(1)} AND ${q('seq')} IN (${seqs.map(checkedSeq).join(', ')})`,
      [owner],
    );
    return affected;
  }

  isUniqueViolation(error: unknown, index?: UniqueIndexRef | string): boolean {
    const err = error as any;
    const details = this.uniqueViolationDetails(err?.driverError ?? err);
    if (!details?.code) return false;
    if (!index) return true;
    return this.matchesIndex(details.text, typeof index === 'string' ? { name: index, table: '', columns: [] } : index);
  }

  /** Whether the error text names the index (PostgreSQL, MySQL) — SQLite overrides this to match columns. */
  protected matchesIndex(text: string, index: UniqueIndexRef): boolean {
    return text.includes(index.name);
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
      attempts: Number(record.attempts),
    };
  }

  /** The WHERE clause of rows that may be claimed now. */
  protected claimableWhere(): string {
    const q = (c: string) => this.quote(c);
    return `${q('status')} = 'pending' AND ${q('available_at')} <= ${this.nowMs} AND (${q('claimed_until')} IS NULL OR ${q('claimed_until')} < ${this.nowMs})`;
  }

  protected readonly claimedColumns = ['seq', 'message_id', 'pattern', 'payload', 'headers', 'ordering_key', 'attempts'];
}
