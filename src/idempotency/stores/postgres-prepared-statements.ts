import { createHash } from 'node:crypto';
import { Logger } from '@nestjs/common';
import type { PoolClient } from 'pg';
import { queryWithin } from './postgres-transaction-end';

/** One statement of a store's hot path: its parameter types and its text (`$1`, `$2`, … for the parameters). */
export interface PreparedStatementSpec {
  params: readonly string[];
  sql: string;
}

/**
 * PostgreSQL's "prepared statement does not exist", "prepared statement already exists", and `0A000`, which an
 * `EXECUTE` raises as "cached plan must not change result type" after a migration altered the table's columns.
 */
const OUT_OF_STEP_CODES = new Set(['26000', '42P05', '0A000']);

/**
 * The statement sets each connection (`pg` client) holds, shared by every store of the process: two stores of the
 * same table (two applications on one DataSource) prepare the same names, and must not prepare them twice.
 */
const preparedOn = new WeakMap<object, Set<string>>();

/**
 * The hot-path statements of a PostgreSQL idempotency store as server-side prepared statements (`PREPARE` /
 * `EXECUTE`), so that PostgreSQL parses and plans each once per connection instead of once per request: measured
 * here, that removes about half the database CPU the key adds to a request. `EXECUTE` goes through the simple-query
 * protocol like the statements it replaces, so several still travel in one round trip.
 *
 * Each statement's name is derived from its text (`nestjs_outbox_` and 16 hex digits of its SHA-256): two versions
 * of the library, or two tables, never share a name for different statements. A connection gets the `PREPARE`s in
 * a round trip of their own, the first time the store uses it.
 *
 * Behind a transaction-pooling proxy (PgBouncer in transaction mode) a client's next transaction may run on another
 * server connection, where its statements do not exist (or exist already when it prepares them). The first such
 * error (`26000`, `42P05`; `0A000` after a migration changed the table under them) turns prepared statements off
 * for this store (the caller retries with the plain SQL), so the library keeps working there, as before, at the
 * cost of the planning.
 */
export class PostgresPreparedStatements<K extends string> {
  private readonly logger = new Logger('Idempotency');
  private readonly names: Record<K, string>;
  private readonly prepareAll: string;
  private enabled = true;

  constructor(specs: Record<K, PreparedStatementSpec>) {
    const names = {} as Record<K, string>;
    const prepares: string[] = [];
    for (const key of Object.keys(specs) as K[]) {
      const { params, sql } = specs[key];
      const text = `(${params.join(', ')}) AS ${sql}`;
      const name = `nestjs_outbox_${createHash('sha256').update(text).digest('hex').slice(0, 16)}`;
      names[key] = name;
      prepares.push(`PREPARE ${name}${text};`);
    }
    this.names = names;
    this.prepareAll = prepares.join('\n');
  }

  /**
   * Prepares the statements on `client` unless it has them (one round trip, once per connection); false when
   * statements are off, or turn off now because the server already had them (a pooling proxy shares its
   * connections): then use the plain SQL.
   */
  prepareOn(client: PoolClient, timeoutMs?: number): boolean | Promise<boolean> {
    if (!this.enabled) return false;
    // Synchronous once the connection has them: the hot path awaits no promise of its own for this check.
    if (preparedOn.get(client)?.has(this.prepareAll)) return true;
    return this.prepare(client, timeoutMs);
  }

  private async prepare(client: PoolClient, timeoutMs: number | undefined): Promise<boolean> {
    let sets = preparedOn.get(client);
    try {
      await queryWithin(client, this.prepareAll, timeoutMs);
    } catch (error) {
      if (this.outOfStep(error)) return false;
      throw error;
    }
    if (!sets) preparedOn.set(client, (sets = new Set()));
    sets.add(this.prepareAll);
    return true;
  }

  /** `EXECUTE name(args)`: every argument an SQL literal the caller made safe (escapeLiteral, integers, NULL). */
  execute(key: K, args: readonly string[]): string {
    return `EXECUTE ${this.names[key]}(${args.join(', ')})`;
  }

  /**
   * Whether `error` shows that the server's prepared statements are not what this store thought (a pooling proxy,
   * or `DEALLOCATE ALL` / `DISCARD ALL` run by someone else): then statements are turned off for good and the
   * caller retries with the plain SQL.
   */
  outOfStep(error: unknown): boolean {
    const code = (error as { code?: unknown } | null)?.code;
    if (!this.enabled || typeof code !== 'string' || !OUT_OF_STEP_CODES.has(code)) return false;
    this.enabled = false;
    this.logger.warn(
      'PostgreSQL prepared statements of the idempotency store are out of step with the server (a transaction-pooling ' +
        'proxy?); the store goes on with plain statements, which the database plans on every request.',
    );
    return true;
  }
}
