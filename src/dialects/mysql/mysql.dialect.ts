import type { EntityManager } from 'typeorm';
import { OutboxConfigurationError, OutboxInvalidMessageError } from '../../errors';
import { companionTablePath, indexNamesOf, tableNameOf } from '../../schema/outbox-table-names';
import type {
  ClaimedOutboxRow,
  ClaimRequest,
  CompanionTable,
  DeadRow,
  DeadRowFilter,
  DeadRowsQuery,
  NewOutboxRow,
} from '../outbox-dialect';
import { describeError } from '../../util/describe-error';
import { inManagerTransaction } from '../../transaction/connection-transaction';
import { checkedSeq, SqlOutboxDialect } from '../sql-dialect.base';
import { CLAIM_LOCK_TIMEOUT_MS } from '../sql-dialect.core';
import { withLockWait } from './mysql-lock-wait';

/** Bytes a MySQL/MariaDB `TEXT` column holds (the outbox's `payload` and `headers`). */
export const MYSQL_TEXT_MAX_BYTES = 65_535;

/** Number of lock rows same-key writers are spread over (a key always maps to the same row). */
export const KEY_LOCK_BUCKETS = 4096;

/** 32-bit FNV-1a of a string's UTF-16 code units: a stable, dependency-free bucket hash. */
export function keyBucket(key: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % KEY_LOCK_BUCKETS;
}

/**
 * MySQL 8 and MariaDB 10.6+: the claim is `SELECT … FOR UPDATE SKIP LOCKED` then `UPDATE` in one transaction;
 * same-key writers are serialized by updating their key's row in `outbox_key_locks` (held until commit); the
 * clock is UTC milliseconds (independent of the session time zone); unique violations are `ER_DUP_ENTRY`.
 */
export class MysqlOutboxDialect extends SqlOutboxDialect {
  readonly name = 'mysql' as const;
  readonly nowMs = `(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)`;

  quote(identifier: string): string {
    return `\`${identifier.replace(/`/g, '``')}\``;
  }

  /**
   * A prepared statement's limit (65,535 placeholders); TypeORM's mysql/mysql2 drivers bind on the client, where
   * `max_allowed_packet` is what counts (see MAX_INSERT_BYTES).
   */
  readonly maxBindParameters = 65_535;

  param(): string {
    return '?';
  }

  /**
   * Refuses a payload or headers larger than a `TEXT` column before the insert: in strict mode MySQL would fail the
   * statement with a bare driver error, and without strict mode it would silently truncate the JSON.
   */
  async insert(manager: EntityManager, table: string, rows: readonly NewOutboxRow[]): Promise<void> {
    for (const row of rows) {
      for (const [what, text] of [
        ['payload', row.payload],
        ['headers', row.headers],
      ] as const) {
        const bytes = text === null ? 0 : Buffer.byteLength(text, 'utf8');
        if (bytes > MYSQL_TEXT_MAX_BYTES) {
          throw new OutboxInvalidMessageError(
            `emit('${row.pattern}'): the ${what} is ${bytes} bytes of JSON, ` +
              `but MySQL/MariaDB store it in a TEXT column of at most ${MYSQL_TEXT_MAX_BYTES} bytes. ` +
              'Keep large data in a table or blob store of your own and emit its id.',
          );
        }
      }
    }
    await super.insert(manager, table, rows);
  }

  /** The key-lock table beside the outbox table (same schema, same prefix). */
  keyLockTable(table: string): string {
    return companionTablePath(table, 'keyLocks');
  }

  /** The key-lock table (see `lockKeys`), needed beside the outbox table. */
  companionTables(table: string): CompanionTable[] {
    return [{ table: this.keyLockTable(table), columns: ['bucket', 'n'] }];
  }

  /**
   * information_schema.COLUMNS with the schema and table name given as constants: MariaDB and MySQL then open only
   * that table's definition (no scan of other schemas). The schema is the table path's, else the connection's.
   */
  async tableColumns(manager: EntityManager, table: string): Promise<string[]> {
    const { schema, name } = this.splitTablePath(table);
    const { records } = await this.execute(
      manager,
      `SELECT COLUMN_NAME AS ${this.quote('name')} FROM information_schema.COLUMNS ` +
        `WHERE TABLE_SCHEMA = ${schema === null ? 'DATABASE()' : '?'} AND TABLE_NAME = ?`,
      schema === null ? [name] : [schema, name],
    );
    return records.map((r) => String(r.name));
  }

  protected async lockKeys(manager: EntityManager, table: string, keys: readonly string[]): Promise<void> {
    const buckets = [...new Set(keys.map(keyBucket))].sort((a, b) => a - b);
    const locks = this.quoteTable(this.keyLockTable(table));
    const q = (c: string) => this.quote(c);
    // UPDATE locks the bucket rows in primary-key order until the transaction ends.
    const update = `UPDATE ${locks} SET ${q('n')} = ${q('n')} + 1 WHERE ${q('bucket')} IN (${buckets.join(', ')})`;
    const { affected } = await this.execute(manager, update);
    if (affected < buckets.length) {
      // First use of these buckets: create them (a concurrent creator waits for us, then ignores the duplicate).
      await this.execute(
        manager,
        `INSERT IGNORE INTO ${locks} (${q('bucket')}, ${q('n')}) VALUES ${buckets.map((b) => `(${b}, 0)`).join(', ')}`,
      );
      await this.execute(manager, update);
    }
  }

  /**
   * Creates the key-lock rows once (idempotent), so `emit()` with a key only ever updates an existing row: no
   * first-insert races between writers. A table that does not exist yet is left alone: it is missing only when the
   * startup schema check is off (`schemaCheck: false`, migrations after boot), and `lockKeys` creates a bucket's row
   * on first use.
   */
  async prepare(manager: EntityManager, table: string): Promise<void> {
    const locks = this.quoteTable(this.keyLockTable(table));
    let records: any[];
    try {
      ({ records } = await this.execute(manager, `SELECT COUNT(*) AS ${this.quote('n')} FROM ${locks}`));
    } catch (error) {
      const driverError = (error as any)?.driverError ?? error;
      if (driverError?.code === 'ER_NO_SUCH_TABLE' || driverError?.errno === 1146) return;
      throw new OutboxConfigurationError(
        `nestjs-outbox needs the table ${locks} on MySQL/MariaDB (it orders each key's messages by commit), ` +
          `but reading it failed: ${describeError(error)}. ` +
          "Add OutboxKeyLock (from outboxEntities() with the outbox's `tables` option) to the DataSource's entities " +
          '(autoLoadEntities does it) and run the CreateOutboxTables migration, or use synchronize in development.',
      );
    }
    if (Number(records[0]?.n ?? 0) >= KEY_LOCK_BUCKETS) return;
    const values = Array.from({ length: KEY_LOCK_BUCKETS }, (_, b) => `(${b}, 0)`).join(', ');
    await this.execute(
      manager,
      `INSERT IGNORE INTO ${locks} (${this.quote('bucket')}, ${this.quote('n')}) VALUES ${values}`,
    );
  }

  /**
   * The base class's rows, with the per-key check split by status. MariaDB reads an outer-correlated
   * `status IN ('pending', 'dead')` through the key index `(ordering_key, status, seq)` as a `ref` on the key alone —
   * every sent row of the key, so the claim slows down as history grows (7× at 1,000,000 history rows) — where
   * `ordering_key = … AND status = …` is a `ref` on both columns that meets only the key's unsent rows.
   */
  protected claimableWhere(table: string, m = 'm'): string {
    const q = (c: string) => this.quote(c);
    const now = this.nowMs;
    const until = `${m}.${q('claimed_until')}`;
    const earlier = (status: string) =>
      `SELECT 1 FROM ${this.quoteTable(table)} e
        WHERE e.${q('ordering_key')} = ${m}.${q('ordering_key')} AND e.${q('status')} = '${status}'
          AND e.${q('seq')} < ${m}.${q('seq')} AND NOT ${this.expiredUnheld('e')}`;
    const waiting = `(e.${q('available_at')} > ${now} OR e.${q('claimed_until')} >= ${now})`;
    return `${m}.${q('status')} = 'pending'
      AND ${m}.${q('available_at')} <= ${now} AND (${until} IS NULL OR ${until} < ${now})
      AND (${m}.${q('ordering_key')} IS NULL OR (
        NOT EXISTS (${earlier('dead')} AND ${this.sameDestination('e', m)})
        AND NOT EXISTS (${earlier('pending')} AND ${this.heldBackBy('e', m, waiting)})
      ))`;
  }

  async claim(manager: EntityManager, { table, owner, limit, leaseMs }: ClaimRequest): Promise<ClaimedOutboxRow[]> {
    const q = (c: string) => this.quote(c);
    const work = async (tx: EntityManager): Promise<ClaimedOutboxRow[]> => {
      // SKIP LOCKED never waits for a row; a table lock (a DDL) is waited for at most CLAIM_LOCK_TIMEOUT_MS.
      const select = `
          SELECT ${this.claimedColumns.map((c) => `m.${q(c)}`).join(', ')}, ${this.claimedAge('m')}
          FROM ${this.quoteTable(table)} m
          WHERE ${this.claimableWhere(table)}
          ORDER BY m.${q('seq')}
          LIMIT ${Math.floor(limit)}
          FOR UPDATE SKIP LOCKED`;
      const { records } = await this.execute(tx, await withLockWait(this, tx, select, CLAIM_LOCK_TIMEOUT_MS));
      if (records.length === 0) return [];
      const locked = records.map((r) => this.toClaimed(r));
      const keep = await this.keepKeyPrefixes(tx, table, locked);
      const rows = locked.filter((r) => keep.has(r.seq));
      if (rows.length === 0) return [];
      await this.execute(
        tx,
        `
          UPDATE ${this.quoteTable(table)}
          SET ${q('claimed_by')} = ?, ${q('claimed_until')} = ${this.nowMs} + ?, ${q('attempts')} = ${q('attempts')} + 1
          WHERE ${q('seq')} IN (${rows.map((r) => checkedSeq(r.seq)).join(', ')})`,
        [owner, leaseMs],
      );
      for (const row of rows) row.attempts += 1;
      return rows;
    };
    // READ COMMITTED: no gap locks, so claims, completion writes and inserts of new rows never deadlock.
    return inManagerTransaction(manager, work, 'READ COMMITTED');
  }

  /** False once the dead index turned out to be missing (a schema made by hand): pages then go without the hint. */
  private deadIndexPresent = true;

  /**
   * MariaDB's cost model prefers reading every dead row from the top of the index (`ref` on status) to the range
   * that starts at the cursor, which makes a deep page read all the rows before it: force the dead index, unless a
   * key or ids filter has a more selective index of its own.
   */
  protected deadIndexHint(filter: DeadRowFilter, table: string): string {
    if (!this.deadIndexPresent || filter.key !== undefined || filter.messageIds !== undefined) return '';
    return ` FORCE INDEX (${this.quote(indexNamesOf.messages(tableNameOf(table)).dead)})`;
  }

  async listDead(manager: EntityManager, table: string, query: DeadRowsQuery): Promise<DeadRow[]> {
    try {
      return await super.listDead(manager, table, query);
    } catch (error) {
      const driverError = (error as any)?.driverError ?? error;
      if (!this.deadIndexPresent || driverError?.errno !== 1176) throw error; // ER_KEY_DOES_NOT_EXITS
      this.deadIndexPresent = false;
      return super.listDead(manager, table, query);
    }
  }

  protected uniqueViolationDetails(error: any) {
    if (error?.code !== 'ER_DUP_ENTRY' && error?.errno !== 1062) return undefined;
    return { code: true, text: `${error.sqlMessage ?? error.message ?? ''}` };
  }
}
