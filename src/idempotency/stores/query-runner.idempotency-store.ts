import type { EntityManager, QueryRunner } from 'typeorm';
import type { SqlOutboxDialect } from '../../dialects/sql-dialect.base';
import { runInTransactionContext } from '../../transaction/transaction-context';
import { runAfterCommit, runOnConnection } from '../../transaction/transaction-runner';
import {
  attemptContext,
  IdempotencyAttempt,
  IdempotencyBegin,
  IdempotencyStore,
  IdempotencyStoreConfig,
  IdempotencyTake,
  isKeyViolation,
  NewIdempotencyRecord,
  RECORD_COLUMNS,
  StoredIdempotencyRecord,
  toStored,
} from '../idempotency-store';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../idempotency.options';
import { connectWithin, IdempotencyWaitLimits } from './connection-wait';

/** A lock taken before the transaction starts, and how to give it back. */
export interface IdempotencyLock {
  /** The key is ours. */
  locked: boolean;
  /** When not `locked`: whether the request holding the key has this request's fingerprint. */
  sameRequest: boolean;
  release(): Promise<void>;
}

/**
 * An idempotency store written with TypeORM query runners and bound parameters: the MySQL/MariaDB and SQLite stores
 * extend it with their lock (`GET_LOCK(name, 0)`; the DataSource's turn) and their batched delete. The order is:
 * lock, begin, read the committed record (the snapshot starts after the lock), run the handler, insert the record,
 * commit, unlock. The wait for the pooled connection is bounded by `connectionTimeout`, and the lock waits of the
 * record's read and write by `lockTimeout` where the database can bound one statement (`bounded()`).
 */
export abstract class QueryRunnerIdempotencyStore implements IdempotencyStore {
  protected readonly dialect: SqlOutboxDialect;

  constructor(protected readonly config: IdempotencyStoreConfig) {
    this.dialect = config.dialect as unknown as SqlOutboxDialect;
  }

  /** Takes the non-blocking lock on (scope, key) for the connection of `runner`. */
  protected abstract lock(
    runner: QueryRunner,
    scope: string,
    key: string,
    fingerprint: string,
  ): Promise<IdempotencyLock>;

  /** Takes the locks inside a transaction opened elsewhere (they are released by `release()`, before its commit). */
  protected abstract lockIn(
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

  async begin(
    scope: string,
    key: string,
    fingerprint: string,
    limits: IdempotencyWaitLimits = DEFAULT_IDEMPOTENCY_OPTIONS,
  ): Promise<IdempotencyBegin> {
    const runner = this.config.dataSource.createQueryRunner();
    await connectWithin(runner, limits.connectionTimeout);
    let lock: IdempotencyLock | undefined;
    const finish = async () => {
      try {
        await lock?.release();
      } finally {
        await runner.release();
      }
    };
    try {
      lock = await this.lock(runner, scope, key, fingerprint);
      if (!lock.locked) {
        // Given back before the read: the key's holder decides, and other duplicates need not wait on this one.
        const taken = lock;
        lock = undefined;
        await taken.release();
        const { record } = await this.select(runner, scope, key, limits);
        await finish();
        return record ? { kind: 'stored', record } : { kind: 'in-flight', sameRequest: taken.sameRequest };
      }
      await runner.startTransaction();
      const { record, expired } = await this.select(runner, scope, key, limits);
      if (record) {
        await runner.rollbackTransaction();
        await finish();
        return { kind: 'stored', record };
      }
      return { kind: 'acquired', attempt: this.attempt(runner, scope, key, expired, finish, limits) };
    } catch (error) {
      if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      await finish();
      throw error;
    }
  }

  async takeIn(manager: EntityManager, scope: string, key: string, fingerprint: string): Promise<IdempotencyTake> {
    const runner = manager.queryRunner ?? manager.connection.createQueryRunner();
    const lock = await this.lockIn(runner, scope, key, fingerprint);
    try {
      const { record, expired } = await this.select(runner, scope, key);
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

  insertIn(
    manager: EntityManager,
    scope: string,
    key: string,
    record: NewIdempotencyRecord,
    replaceExpired: boolean,
  ): Promise<void> {
    return this.insertRecord(manager, scope, key, record, replaceExpired, DEFAULT_IDEMPOTENCY_OPTIONS);
  }

  protected async insertRecord(
    manager: EntityManager,
    scope: string,
    key: string,
    record: NewIdempotencyRecord,
    replaceExpired: boolean,
    limits: IdempotencyWaitLimits,
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

  protected attempt(
    runner: QueryRunner,
    scope: string,
    key: string,
    expired: boolean,
    finish: () => Promise<void>,
    limits: IdempotencyWaitLimits,
  ): IdempotencyAttempt {
    const context = attemptContext(this.config.dataSource, runner.manager);
    const abort = async () => {
      try {
        if (runner.isTransactionActive) await runner.rollbackTransaction();
      } finally {
        await finish();
      }
    };
    return {
      context,
      run: (work) => runInTransactionContext(context, work),
      commit: async (record: NewIdempotencyRecord) => {
        try {
          await this.insertRecord(runner.manager, scope, key, record, expired, limits);
          await runner.commitTransaction();
        } catch (error) {
          await abort().catch(() => undefined);
          if (isKeyViolation(this.config, error)) return false;
          throw error;
        }
        // Committed: a lock that cannot be given back died with its connection.
        await finish().catch(() => undefined);
        runAfterCommit(context);
        return true;
      },
      commitWithoutRecord: async () => {
        try {
          await runner.commitTransaction();
        } catch (error) {
          await abort().catch(() => undefined);
          throw error;
        }
        await finish().catch(() => undefined);
        runAfterCommit(context);
      },
      rollback: abort,
    };
  }
}
