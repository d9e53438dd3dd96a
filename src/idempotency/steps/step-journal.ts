import type { DataSource, EntityManager } from 'typeorm';
import type { SqlOutboxDialect } from '../../dialects/sql-dialect.base';
import { runOnConnection } from '../../transaction/transaction-runner';

/** A recorded step as read back. */
export interface RecordedStep {
  fingerprint: string;
  /** JSON text, or null for undefined. */
  result: string | null;
  /** Past its expiry: ignored, and replaced when the step runs again. */
  expired: boolean;
}

/** What a completed step writes. */
export interface NewRecordedStep {
  scope: string;
  key: string;
  step: string;
  fingerprint: string;
  result: string | null;
  /** Milliseconds until it expires (on the database clock). */
  ttl: number;
}

/**
 * The `idempotency_steps` table: reads a step's recorded result, inserts one, deletes expired ones. Written once
 * against the dialect's `quote()`, `param()` and `nowMs`. Where an insert commits is the caller's choice (see
 * `step-scope.ts`).
 */
export class StepJournal {
  private readonly table: string;
  private readonly sql: { select: string; insert: string };

  constructor(
    readonly dataSource: DataSource,
    readonly dialect: SqlOutboxDialect,
    table: string,
  ) {
    this.table = dialect.quoteTable(table);
    const q = (c: string) => dialect.quote(c);
    const p = (i: number) => dialect.param(i);
    this.sql = {
      select: `
        SELECT ${q('fingerprint')}, ${q('result')},
          CASE WHEN ${q('expires_at')} <= ${dialect.nowMs} THEN 1 ELSE 0 END AS ${q('expired')}
        FROM ${this.table}
        WHERE ${q('scope')} = ${p(1)} AND ${q('idempotency_key')} = ${p(2)} AND ${q('step')} = ${p(3)}`,
      insert: `
        INSERT INTO ${this.table} (
          ${q('scope')}, ${q('idempotency_key')}, ${q('step')}, ${q('fingerprint')}, ${q('result')},
          ${q('created_at')}, ${q('expires_at')}
        )
        SELECT ${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, n.ms, n.ms + ${p(6)}
        FROM (SELECT ${dialect.nowMs} AS ms) AS n`,
    };
  }

  /** The recorded result of (scope, key, step), read through `manager`; undefined when none. */
  async read(manager: EntityManager, scope: string, key: string, step: string): Promise<RecordedStep | undefined> {
    const { records } = await this.dialect.execute(manager, this.sql.select, [scope, key, step]);
    const row = records[0];
    if (!row) return undefined;
    return { fingerprint: String(row.fingerprint), result: row.result ?? null, expired: Number(row.expired) === 1 };
  }

  /** Inserts the step through `manager` (after deleting its expired row, if any); commits where `manager` commits. */
  async insert(manager: EntityManager, row: NewRecordedStep, replaceExpired: boolean): Promise<void> {
    const q = (c: string) => this.dialect.quote(c);
    const p = (i: number) => this.dialect.param(i);
    if (replaceExpired) {
      await this.dialect.execute(
        manager,
        `DELETE FROM ${this.table}
         WHERE ${q('scope')} = ${p(1)} AND ${q('idempotency_key')} = ${p(2)} AND ${q('step')} = ${p(3)}
           AND ${q('expires_at')} <= ${this.dialect.nowMs}`,
        [row.scope, row.key, row.step],
      );
    }
    await this.dialect.execute(manager, this.sql.insert, [
      row.scope,
      row.key,
      row.step,
      row.fingerprint,
      row.result,
      Math.floor(row.ttl),
    ]);
  }

  /** Deletes up to `limit` expired steps in one short statement; resolves with the number deleted. */
  deleteExpired(limit: number): Promise<number> {
    const q = (c: string) => this.dialect.quote(c);
    const n = Math.max(1, Math.floor(limit));
    return runOnConnection(this.dataSource, async (manager) => {
      const { affected } = await this.dialect.execute(
        manager,
        `
          DELETE FROM ${this.table}
          WHERE ${q('id')} IN (
            SELECT ${q('id')} FROM (
              SELECT ${q('id')}
              FROM ${this.table}
              WHERE ${q('expires_at')} <= ${this.dialect.nowMs}
              ORDER BY ${q('expires_at')}
              LIMIT ${n}
            ) AS expired
          )`,
      );
      return affected;
    });
  }
}
