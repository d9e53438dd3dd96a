import type { SqlOutboxDialect } from './sql-dialect.base';
import type { EntityManager } from 'typeorm';
import type { OutboxStatement } from '../transaction/transaction.types';
import {
  IdempotencyStore,
  IdempotencyStoreConfig,
  IdempotencyTake,
  KeyTaken,
  KeyTaking,
  NewIdempotencyRecord,
  RECORD_COLUMNS,
  StoredIdempotencyRecord,
  toStored,
} from './key-store';
import type { IdempotencyWaitLimits } from './key-store';

/** The columns an insert writes, in the order of its values. */
const INSERT_COLUMNS = [
  'scope',
  'idempotency_key',
  'fingerprint',
  'response_status',
  'response_body',
  'response_headers',
  'created_at',
  'expires_at',
] as const;

/**
 * How a database guards a key besides its record: one statement tries two non-blocking locks, the request's
 * (key and fingerprint) first and the key's only when it got that one; its row's `taken` is 2 with both, 1 with
 * the request's only (the key is held by a different request: 422), 0 with neither (a request with this
 * fingerprint is contending: 409). The key's holder so always holds the lock of its own fingerprint; taking the
 * key's lock first could meet a holder that had not taken its own yet, and tell a plain retry it is another request.
 */
export interface KeyLock {
  readonly statement: OutboxStatement;
  /** Statements that give the locks back once the transaction has ended (none when they end with it). */
  readonly release: OutboxStatement[];
}

/**
 * The idempotency store of every SQL database, in statements with bound values: the key's lock (`lock()`), the
 * committed record's read, the record's insert. The transaction runner runs them in the transaction it holds
 * (`held-attempt.ts`): lock, read (under READ COMMITTED and REPEATABLE READ alike the read's snapshot starts
 * after the lock, so a winner that just committed is seen), the handler, insert, commit, then any release. Each
 * database adds its lock, the bound on its statements' lock waits (`bounded()`) and its batched delete.
 */
export abstract class SqlIdempotencyStore implements IdempotencyStore {
  protected readonly dialect: SqlOutboxDialect;
  protected readonly table: string;

  constructor(protected readonly config: IdempotencyStoreConfig) {
    this.dialect = config.dialect as unknown as SqlOutboxDialect;
    this.table = this.dialect.quoteTable(config.table);
  }

  /** The key's locks; undefined where the held transaction alone keeps others out (SQLite's turn). */
  protected abstract lock(scope: string, key: string, fingerprint: string): KeyLock | undefined;

  /** SQL that deletes up to `limit` expired records. */
  protected abstract deleteExpiredSql(limit: number): string;

  /**
   * `statements` with their lock waits bounded by `lockTimeout` where the database can bound them, and the index
   * of the first of them in the result (statements may be added around them). Unchanged by default.
   */
  protected async bounded(
    statements: OutboxStatement[],
    _limits: IdempotencyWaitLimits,
  ): Promise<{ statements: OutboxStatement[]; offset: number }> {
    return { statements, offset: 0 };
  }

  /** A placeholder of a value of `type` (PostgreSQL needs the type where the statement alone does not tell it). */
  protected typed(placeholder: string, _type: 'int' | 'bigint'): string {
    return placeholder;
  }

  protected get q(): (column: string) => string {
    return (column) => this.dialect.quote(column);
  }

  protected where(): string {
    const { q } = this;
    return `${q('scope')} = ${this.dialect.param(1)} AND ${q('idempotency_key')} = ${this.dialect.param(2)}`;
  }

  protected readStatement(scope: string, key: string): OutboxStatement {
    const { q } = this;
    return {
      sql: `SELECT ${RECORD_COLUMNS.map(q).join(', ')},
          CASE WHEN ${q('expires_at')} <= ${this.dialect.nowMs} THEN 1 ELSE 0 END AS ${q('expired')}
        FROM ${this.table} WHERE ${this.where()}`,
      params: [scope, key],
    };
  }

  async take(
    scope: string,
    key: string,
    fingerprint: string,
    limits: IdempotencyWaitLimits,
    _message?: { ttl: number },
  ): Promise<KeyTaking> {
    const lock = this.lock(scope, key, fingerprint);
    const own = lock ? [lock.statement, this.readStatement(scope, key)] : [this.readStatement(scope, key)];
    const { statements, offset } = await this.bounded(own, limits);
    return {
      statements,
      release: lock?.release ?? [],
      outcome: (rows): IdempotencyTake => {
        const taken = lock ? Number((rows[offset]?.[0] as { taken?: unknown } | undefined)?.taken) : 2;
        const { record, expired } = toStored(rows[offset + own.length - 1]?.[0]);
        if (record) return { kind: 'stored', record };
        if (taken !== 2) return { kind: 'in-flight', sameRequest: taken === 0 };
        return { kind: 'acquired', expired };
      },
    };
  }

  async record(
    scope: string,
    key: string,
    record: NewIdempotencyRecord,
    taken: KeyTaken,
    limits: IdempotencyWaitLimits,
  ): Promise<OutboxStatement[]> {
    const { q } = this;
    const p = (n: number) => this.dialect.param(n);
    const insert: OutboxStatement = {
      sql: `INSERT INTO ${this.table} (${INSERT_COLUMNS.map(q).join(', ')})
        SELECT ${p(1)}, ${p(2)}, ${p(3)}, ${this.typed(p(4), 'int')}, ${p(5)}, ${p(6)}, n.ms, n.ms + ${this.typed(p(7), 'bigint')}
        FROM (SELECT ${this.dialect.nowMs} AS ms) AS n`,
      params: [scope, key, record.fingerprint, record.status, record.body, record.headers, Math.floor(record.ttl)],
    };
    const replace = { sql: `DELETE FROM ${this.table} WHERE ${this.where()}`, params: [scope, key] };
    return (await this.bounded(taken.expired ? [replace, insert] : [insert], limits)).statements;
  }

  async read(manager: EntityManager, scope: string, key: string): Promise<StoredIdempotencyRecord | undefined> {
    const { sql, params } = this.readStatement(scope, key);
    const { records } = await this.dialect.execute(manager, sql, [...(params ?? [])]);
    return toStored(records[0]).record;
  }

  async deleteExpired(manager: EntityManager, limit: number): Promise<number> {
    const { affected } = await this.dialect.execute(manager, this.deleteExpiredSql(Math.max(1, Math.floor(limit))));
    return affected;
  }
}
