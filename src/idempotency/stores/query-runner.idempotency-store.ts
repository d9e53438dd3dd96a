import type { EntityManager, QueryRunner } from 'typeorm';
import type { SqlOutboxDialect } from '../../dialects/sql-dialect.base';
import { runOnConnection } from '../../transaction/transaction-runner';
import {
  IdempotencyStore,
  IdempotencyStoreConfig,
  IdempotencyTake,
  NewIdempotencyRecord,
  RECORD_COLUMNS,
  StoredIdempotencyRecord,
  toStored,
} from '../idempotency-store';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../idempotency.options';
import type { IdempotencyWaitLimits } from './connection-wait';

/** A lock taken in the transaction, and how to give it back once the transaction has ended. */
export interface IdempotencyLock {
  /** The key is ours. */
  locked: boolean;
  /** When not `locked`: whether the request holding the key has this request's fingerprint. */
  sameRequest: boolean;
  release(): Promise<void>;
}

/**
 * An idempotency store written with TypeORM query runners and bound parameters: the MySQL/MariaDB and SQLite stores
 * extend it with their lock (`GET_LOCK(name, 0)`; nothing on SQLite, where the held transaction has the
 * DataSource's turn) and their batched delete. In the transaction the runner holds (`held-attempt.ts`) the order
 * is: lock, read the committed record (the snapshot starts at that read, after the lock), run the handler, insert
 * the record, commit, unlock. The lock waits of the record's read and write are bounded by `lockTimeout` where the
 * database can bound one statement (`bounded()`).
 */
export abstract class QueryRunnerIdempotencyStore implements IdempotencyStore {
  protected readonly dialect: SqlOutboxDialect;

  constructor(protected readonly config: IdempotencyStoreConfig) {
    this.dialect = config.dialect as unknown as SqlOutboxDialect;
  }

  /** Takes the non-blocking locks on (scope, key) and (scope, key, fingerprint) in the transaction of `runner`. */
  protected abstract lock(
    runner: QueryRunner,
    scope: string,
    key: string,
    fingerprint: string,
  ): Promise<IdempotencyLock>;

  /** SQL that deletes up to `limit` expired records. */
  protected abstract deleteExpiredSql(limit: number): string;

  /**
   * One of the library's statements on the record, its lock waits bounded by `lockTimeout` (MySQL/MariaDB);
   * unchanged by default (SQLite: nothing to wait for but the DataSource's turn).
   */
  protected async bounded(_manager: EntityManager, sql: string, _limits: IdempotencyWaitLimits): Promise<string> {
    return sql;
  }

  protected get quotedTable(): string {
    return this.dialect.quoteTable(this.config.table);
  }

  async takeIn(
    manager: EntityManager,
    scope: string,
    key: string,
    fingerprint: string,
    limits: IdempotencyWaitLimits = DEFAULT_IDEMPOTENCY_OPTIONS,
  ): Promise<IdempotencyTake> {
    const runner = manager.queryRunner ?? manager.connection.createQueryRunner();
    const lock = await this.lock(runner, scope, key, fingerprint);
    try {
      const { record, expired } = await this.select(runner, scope, key, limits);
      if (record) {
        await lock.release();
        return { kind: 'stored', record };
      }
      if (!lock.locked) {
        await lock.release();
        return { kind: 'in-flight', sameRequest: lock.sameRequest };
      }
      return { kind: 'acquired', expired, release: () => lock.release() };
    } catch (error) {
      await lock.release().catch(() => undefined);
      throw error;
    }
  }

  async insertIn(
    manager: EntityManager,
    scope: string,
    key: string,
    record: NewIdempotencyRecord,
    replaceExpired: boolean,
    limits: IdempotencyWaitLimits = DEFAULT_IDEMPOTENCY_OPTIONS,
  ): Promise<void> {
    const q = (c: string) => this.dialect.quote(c);
    if (replaceExpired) {
      await this.dialect.execute(
        manager,
        await this.bounded(
          manager,
          `DELETE FROM ${this.quotedTable} WHERE ${q('scope')} = ? AND ${q('idempotency_key')} = ?`,
          limits,
        ),
        [scope, key],
      );
    }
    const now = this.dialect.nowMs;
    await this.dialect.execute(
      manager,
      await this.bounded(
        manager,
        `
        INSERT INTO ${this.quotedTable} (
          ${q('scope')}, ${q('idempotency_key')}, ${q('fingerprint')}, ${q('response_status')},
          ${q('response_body')}, ${q('response_headers')}, ${q('created_at')}, ${q('expires_at')}
        )
        SELECT ?, ?, ?, ?, ?, ?, n.ms, n.ms + ?
        FROM (SELECT ${now} AS ms) AS n`,
        limits,
      ),
      [scope, key, record.fingerprint, record.status, record.body, record.headers, Math.floor(record.ttl)],
    );
  }

  async read(scope: string, key: string): Promise<StoredIdempotencyRecord | undefined> {
    return runOnConnection(this.config.dataSource, async (manager) => {
      const runner = manager.connection.createQueryRunner();
      try {
        return (await this.select(runner, scope, key)).record;
      } finally {
        await runner.release();
      }
    });
  }

  async deleteExpired(limit: number): Promise<number> {
    return runOnConnection(this.config.dataSource, async (manager) => {
      const { affected } = await this.dialect.execute(manager, this.deleteExpiredSql(Math.max(1, Math.floor(limit))));
      return affected;
    });
  }

  protected async select(
    runner: QueryRunner,
    scope: string,
    key: string,
    limits: IdempotencyWaitLimits = DEFAULT_IDEMPOTENCY_OPTIONS,
  ) {
    const q = (c: string) => this.dialect.quote(c);
    const sql = `
        SELECT ${RECORD_COLUMNS.map(q).join(', ')},
          CASE WHEN ${q('expires_at')} <= ${this.dialect.nowMs} THEN 1 ELSE 0 END AS ${q('expired')}
        FROM ${this.quotedTable}
        WHERE ${q('scope')} = ? AND ${q('idempotency_key')} = ?`;
    const { records } = await this.dialect.execute(runner.manager, await this.bounded(runner.manager, sql, limits), [
      scope,
      key,
    ]);
    return toStored(records[0]);
  }
}
