import { createHash } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import type { ClaimedOutboxRow, ClaimRequest } from '../outbox-dialect';
import { pgConnectionConfig, pgModule } from './postgres.connection';
import { ExecuteOptions, SqlOutboxDialect, StatementResult } from '../sql-dialect.base';
import { CLAIM_LOCK_TIMEOUT_MS } from '../sql-dialect.core';
import { SerialQueue } from '../../util/serial-queue';
import { inPoolTransaction } from '../../transaction/connection-transaction';
import { walPolledCondition } from './wal/wal-rows.sql';

/**
 * Connections of the relay's own pool per DataSource: a claim never queues behind the default 4 batches' completion
 * writes.
 */
const RELAY_POOL_SIZE = 5;

import { OUTBOX_ADVISORY_LOCK_CLASS } from '../../scheduling/outbox-resource-names';

export { OUTBOX_ADVISORY_LOCK_CLASS };

/**
 * PostgreSQL: the claim is one `UPDATE … RETURNING` over rows locked `FOR UPDATE SKIP LOCKED`; same-key writers
 * are serialized with transaction-scoped advisory locks (safe behind transaction-pooling proxies); unique
 * violations are `23505`.
 */
export class PostgresOutboxDialect extends SqlOutboxDialect {
  readonly name = 'postgres' as const;
  readonly nowMs = `(extract(epoch from clock_timestamp()) * 1000)::bigint`;
  override get insertNowMs(): string {
    return `(extract(epoch from statement_timestamp()) * 1000)::bigint`;
  }

  /** `advisoryLockClass`: first key of the advisory locks of same-key writers, one per outbox. */
  constructor(readonly advisoryLockClass: number = OUTBOX_ADVISORY_LOCK_CLASS) {
    super();
  }

  quote(identifier: string): string {
    return `"${identifier.replace(/"/g, '""')}"`;
  }

  /** The wire protocol's Bind message counts parameters in 16 bits. */
  readonly maxBindParameters = 65_535;

  param(index: number): string {
    return `$${index}`;
  }

  /** The relay's own small pool per DataSource (`null` once disposed: statements fall back to TypeORM's pool). */
  private readonly relayPools = new WeakMap<DataSource, any>();
  /** The library's statements on one transaction's connection, one at a time (see execute()). */
  private readonly runnerQueues = new WeakMap<object, SerialQueue>();

  /**
   * Relay statements (claim, completion writes) run on a small pool of the relay's own, with
   * `synchronous_commit = off`: a claim or a mark lost in a database crash only means the message is published
   * again (at-least-once), and the relay no longer waits for a WAL flush per statement. The claim, whose text never
   * changes, is a named prepared statement. Everything else — the callers' transactions included — stays on
   * TypeORM's connections.
   */
  async execute(
    manager: EntityManager,
    sql: string,
    params: unknown[] = [],
    options: ExecuteOptions = {},
  ): Promise<StatementResult> {
    if (options.relay && !manager.queryRunner) {
      const pool = this.relayPool(manager.connection);
      if (pool) {
        const query = options.name
          ? {
              name: `nestjs_outbox_${options.name}_${createHash('sha1').update(sql).digest('hex').slice(0, 12)}`,
              text: sql,
              values: params,
            }
          : { text: sql, values: params };
        try {
          const result = options.lockTimeout
            ? await this.withLockTimeout(pool, query, options.lockTimeout)
            : await pool.query(query);
          return { records: result.rows ?? [], affected: Number(result.rowCount ?? 0) };
        } catch (error) {
          // PgBouncer refuses the `options` startup parameter: use TypeORM's connections from now on.
          if (!/unsupported startup parameter/i.test(String((error as Error)?.message))) throw error;
          await this.dispose(manager.connection);
        }
      }
    }
    const runner = manager.queryRunner;
    if (!runner) return super.execute(manager, sql, params, options);
    // Concurrent emit()s in one transaction (`Promise.all(items.map((i) => outbox.emit(…)))`) share one `pg` client,
    // and `pg` deprecates a query sent while the client still runs another (removed in pg 9): queue them.
    let queue = this.runnerQueues.get(runner);
    if (!queue) this.runnerQueues.set(runner, (queue = new SerialQueue()));
    return queue.run(() => super.execute(manager, sql, params, options));
  }

  /** `query` in a transaction of its own whose lock waits end after `ms` (`SET LOCAL lock_timeout`). */
  private withLockTimeout(pool: any, query: object, ms: number): Promise<any> {
    const withBegin = `SET LOCAL lock_timeout = ${Math.max(1, Math.floor(ms))}`;
    return inPoolTransaction(pool, { withBegin }, (client) => client.query(query));
  }

  private relayPool(dataSource: DataSource): any {
    let pool = this.relayPools.get(dataSource);
    if (pool === undefined) {
      const { Pool } = pgModule(dataSource);
      pool = new Pool({
        ...pgConnectionConfig(dataSource, 'nestjs-outbox-relay'),
        max: RELAY_POOL_SIZE,
        idleTimeoutMillis: 30_000,
        options: '-c synchronous_commit=off',
      });
      pool.on('error', () => undefined); // an idle connection that dies is replaced on the next query
      this.relayPools.set(dataSource, pool);
    }
    return pool;
  }

  async dispose(dataSource: DataSource): Promise<void> {
    const pool = this.relayPools.get(dataSource);
    this.relayPools.set(dataSource, null);
    if (pool) await pool.end().catch(() => undefined);
  }

  protected async lockKeys(manager: EntityManager, _table: string, keys: readonly string[]): Promise<void> {
    await this.execute(
      manager,
      `
        SELECT pg_advisory_xact_lock(${this.advisoryLockClass | 0}, hashtext(k))
        FROM unnest($1::text[]) WITH ORDINALITY AS t(k, i)
        ORDER BY i`,
      [keys],
    );
  }

  /**
   * `to_regclass` resolves the name exactly as the library's statements do (search_path included, so no schema has
   * to be guessed as information_schema would need) and the columns are read through pg_attribute's
   * (attrelid, attnum) index: one cheap query, no row of the table read.
   */
  async tableColumns(manager: EntityManager, table: string): Promise<string[]> {
    const { records } = await this.execute(
      manager,
      'SELECT a.attname AS name FROM pg_catalog.pg_attribute a ' +
        'WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped',
      [this.quoteTable(table)],
    );
    return records.map((r) => String(r.name));
  }

  /**
   * Pending, written as a range: with `status = 'pending'` PostgreSQL treats the status as a constant and may read
   * the rows in `seq` order through the primary key instead of the claim index `(status, seq)`. It does so when most
   * rows are pending — a backlog after an outage — and then walks every row already sent on each claim (a claim took
   * 1.8 s with 220,000 of 1,000,000 rows drained). A range keeps the status a sort column, which only the claim
   * index delivers in order (the claim orders by `(status, seq)`).
   */
  protected pendingCondition(m: string): string {
    const status = `${m}.${this.quote('status')}`;
    return `${status} >= 'pending' AND ${status} <= 'pending'`;
  }

  async claim(
    manager: EntityManager,
    { table, owner, limit, leaseMs, walHandoffMs }: ClaimRequest,
  ): Promise<ClaimedOutboxRow[]> {
    const q = (c: string) => this.quote(c);
    const t = this.quoteTable(table);
    const handoff = walHandoffMs === undefined ? '' : `AND ${walPolledCondition(this, 'm', walHandoffMs)}`;
    // c: the rows this claim locks; ok: of those, keyed rows only when no earlier unsent row of their key and
    // destination is outside c (held by a concurrent claim that has not committed yet).
    const { records } = await this.execute(
      manager,
      `WITH c AS MATERIALIZED (
         SELECT m.${q('seq')}, m.${q('ordering_key')}, m.${q('destination')}
         FROM ${t} m
         WHERE ${this.claimableWhere(table)} ${handoff}
         ORDER BY m.${q('status')}, m.${q('seq')}
         LIMIT $2
         FOR UPDATE SKIP LOCKED
       ),
       ok AS (
         SELECT c.${q('seq')}
         FROM c
         WHERE c.${q('ordering_key')} IS NULL OR NOT EXISTS (
           SELECT 1
           FROM ${t} e
           WHERE e.${q('ordering_key')} = c.${q('ordering_key')}
             AND e.${q('status')} IN ('pending', 'dead') AND e.${q('seq')} < c.${q('seq')}
             AND NOT ${this.expiredUnheld('e')}
             AND ${this.sameDestination('e', 'c')}
             AND e.${q('seq')} NOT IN (SELECT c2.${q('seq')} FROM c c2)
         )
       )
       UPDATE ${t} m
       SET ${q('claimed_by')} = $1, ${q('claimed_until')} = ${this.nowMs} + $3,
         ${q('attempts')} = m.${q('attempts')} + 1
       FROM ok
       WHERE m.${q('seq')} = ok.${q('seq')}
       RETURNING ${this.claimedColumns.map((c) => `m.${q(c)}`).join(', ')}, ${this.claimedAge('m')}`,
      [owner, limit, leaseMs],
      { relay: true, name: 'claim', lockTimeout: CLAIM_LOCK_TIMEOUT_MS },
    );
    return records.map((r) => this.toClaimed(r)).sort((a, b) => Number(BigInt(a.seq) - BigInt(b.seq)));
  }

  async deleteExpiredSent(manager: EntityManager, table: string, retentionMs: number, limit: number): Promise<number> {
    const q = (c: string) => this.quote(c);
    const t = this.quoteTable(table);
    const { affected } = await this.execute(
      manager,
      `
        DELETE FROM ${t}
        WHERE ${q('seq')} IN (
          SELECT ${q('seq')}
          FROM ${t}
          WHERE ${q('status')} = 'sent' AND ${q('sent_at')} < ${this.nowMs} - $1
          ORDER BY ${q('sent_at')}
          LIMIT $2
          FOR UPDATE SKIP LOCKED
        )`,
      [Math.max(0, Math.floor(retentionMs)), Math.max(1, Math.floor(limit))],
    );
    return affected;
  }

  /** A row comparison: the index `(status, dead_at, seq)` serves it as one range, scanned backwards. */
  protected keysetBefore(deadAt: string, seq: string): string {
    return `(${this.quote('dead_at')}, ${this.quote('seq')}) < (${deadAt}, ${seq})`;
  }

  protected uniqueViolationDetails(error: any) {
    if (error?.code !== '23505') return undefined;
    return { code: true, text: `${error.constraint ?? ''} ${error.message ?? ''}` };
  }
}
