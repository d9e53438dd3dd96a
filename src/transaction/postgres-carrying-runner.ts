import { Logger } from '@nestjs/common';
import { DataSource, QueryFailedError, QueryRunner } from 'typeorm';
import type { OutboxStatement } from './transaction.types';
import { sha256Hex } from '../util/sha256';

/** What the runner needs of a `pg` client: a query with a client-side time limit, and the driver's own escaping. */
interface PgClient {
  query(config: { text: string; query_timeout?: number }): Promise<PgResult | PgResult[]>;
  escapeLiteral(value: string): string;
}
type PgResult = { rows?: unknown[] };

/** The statements a runner sends with its next `keyword` (`START TRANSACTION` or `COMMIT`), and what came back. */
interface Carried {
  keyword: string;
  statements: readonly OutboxStatement[];
  timeoutMs?: number;
  rows?: unknown[][];
}

/**
 * A TypeORM PostgreSQL query runner that can send statements of the library's in the round trip of its own
 * `START TRANSACTION` (after it) or `COMMIT` (before it): `BEGIN` with the key's locks and read, the record's insert
 * with `COMMIT`. TypeORM still begins and commits the transaction (its state, events and savepoints stay its own);
 * only the text of that one query grows.
 */
export interface CarryingQueryRunner extends QueryRunner {
  /**
   * Sends `statements` with the next query whose text is `keyword`, bounded by `timeoutMs` on the client (a
   * `Query read timeout` then; see `broken`). Their rows are `carriedRows()` once it has been sent.
   */
  carry(keyword: string, statements: readonly OutboxStatement[], timeoutMs?: number): void;
  /** The rows of each carried statement, in order; undefined while they have not been sent. */
  carriedRows(): unknown[][] | undefined;
  /** Set when a carried round trip timed out on the client: the connection is mid-statement and must be discarded. */
  readonly broken?: unknown;
}

/**
 * PostgreSQL's "prepared statement does not exist" / "already exists", and `0A000`, which an `EXECUTE` raises as
 * "cached plan must not change result type" after a migration altered a table under it.
 */
const OUT_OF_STEP_CODES = new Set(['26000', '42P05', '0A000']);

/** The statements each connection (`pg` client) has prepared, by name. */
const preparedOn = new WeakMap<object, Set<string>>();

/** Whether a DataSource's carried statements are prepared (off for good once the server is out of step). */
interface Preparing {
  enabled: boolean;
}

/** Names of the statements prepared so far, by text: a handful of texts, hashed once each. */
const preparedNames = new Map<string, string>();

/** The name of a statement prepared from `sql`: its text's hash, so different statements never share one. */
function preparedName(sql: string): string {
  let name = preparedNames.get(sql);
  if (name === undefined) {
    name = `nestjs_outbox_${sha256Hex(sql).slice(0, 16)}`;
    // The library's statements are few; a bound keeps a pathological caller from growing the map for ever.
    if (preparedNames.size < 1000) preparedNames.set(sql, name);
  }
  return name;
}

type RunnerClass = new (driver: unknown, mode: string) => QueryRunner;
const carryingClasses = new WeakMap<DataSource, new (driver: unknown, mode: string) => CarryingQueryRunner>();

/**
 * A carrying query runner of `dataSource` (PostgreSQL): a subclass of the DataSource's own query runner class,
 * made once per DataSource, built as `DataSource.createQueryRunner()` builds one (the driver's runner plus a manager).
 */
export function createCarryingRunner(dataSource: DataSource): CarryingQueryRunner {
  let Carrying = carryingClasses.get(dataSource);
  if (!Carrying) {
    const base = dataSource.driver.createQueryRunner('master').constructor as RunnerClass;
    carryingClasses.set(dataSource, (Carrying = carryingClassOf(base, { enabled: true })));
  }
  const runner = new Carrying(dataSource.driver, 'master');
  Object.assign(runner, { manager: dataSource.createEntityManager(runner) });
  return runner;
}

/**
 * The carried statements that bind values are server-side prepared statements: each connection gets a statement's
 * `PREPARE` once (in a round trip of its own, the first time it carries it), then `EXECUTE`s it with literals, in
 * the same round trips as before — PostgreSQL then plans the library's statements once per connection, not once per
 * call. Behind a transaction-pooling proxy (PgBouncer in transaction mode), where a client's statements may live on
 * another server connection, or after `DEALLOCATE ALL`, the first sign of it (`26000`, `42P05`; `0A000` after a
 * migration) turns them off for the DataSource, with one warning: the call that met it fails (a request is
 * answered 5xx, a message requeued), the next ones send the plain statements.
 */
function carryingClassOf(Base: RunnerClass, preparing: Preparing) {
  /** True (and prepared statements off for good) when `error` shows the server's statements are not ours. */
  function outOfStep(error: unknown): boolean {
    const code = (error as { code?: unknown } | null)?.code;
    if (typeof code !== 'string' || !OUT_OF_STEP_CODES.has(code) || !preparing.enabled) return false;
    preparing.enabled = false;
    new Logger('OutboxTransaction').warn(
      'PostgreSQL prepared statements are out of step with the server (a transaction-pooling proxy, or DEALLOCATE ' +
        'ALL); the library goes on with plain statements, which the database plans on every call.',
    );
    return true;
  }

  return class CarryingRunner extends Base implements CarryingQueryRunner {
    private pending?: Carried;
    private sent?: Carried;
    broken?: unknown;

    carry(keyword: string, statements: readonly OutboxStatement[], timeoutMs?: number): void {
      this.pending = { keyword, statements, timeoutMs };
      this.sent = undefined;
    }

    carriedRows(): unknown[][] | undefined {
      return this.sent?.rows;
    }

    /** Prepares the carried statements `client` does not have yet; false when prepared statements are off. */
    private async prepare(client: PgClient, carried: Carried): Promise<boolean> {
      if (!preparing.enabled) return false;
      let names = preparedOn.get(client);
      if (!names) preparedOn.set(client, (names = new Set()));
      const missing = carried.statements.filter((s) => s.params?.length && !names.has(preparedName(s.sql)));
      if (missing.length === 0) return true;
      const text = [...new Set(missing.map((s) => s.sql))]
        .map((sql) => `PREPARE ${preparedName(sql)} AS ${sql}`)
        .join(';\n');
      try {
        await client.query({ text, query_timeout: carried.timeoutMs });
      } catch (error) {
        if (error instanceof Error && /Query read timeout/i.test(error.message)) this.broken = error;
        if (outOfStep(error)) return false;
        throw new QueryFailedError(text, [], error as Error);
      }
      for (const s of missing) names.add(preparedName(s.sql));
      return true;
    }

    async query(sql: string, parameters?: unknown[], useStructuredResult?: boolean): Promise<any> {
      const carried = this.pending;
      if (!carried || sql !== carried.keyword || (parameters && parameters.length > 0)) {
        return super.query(sql, parameters, useStructuredResult as any);
      }
      this.pending = undefined;
      const client = (await this.connect()) as PgClient;
      const prepared = await this.prepare(client, carried);
      const own = carried.statements.map((statement) =>
        prepared && statement.params?.length
          ? `EXECUTE ${preparedName(statement.sql)}(${statement.params.map((v) => literal(client, v)).join(', ')})`
          : inlined(client, statement),
      );
      // BEGIN first, its statements after it; COMMIT last, its statements before it.
      const text = (carried.keyword === 'COMMIT' ? [...own, sql] : [sql, ...own]).join(';\n');
      let results: PgResult[];
      try {
        const answer = await client.query({ text, query_timeout: carried.timeoutMs });
        results = Array.isArray(answer) ? answer : [answer];
      } catch (error) {
        if (error instanceof Error && /Query read timeout/i.test(error.message)) this.broken = error;
        if (prepared) outOfStep(error);
        throw new QueryFailedError(text, [], error as Error);
      }
      const rows = results.map((result) => result.rows ?? []);
      carried.rows = carried.keyword === 'COMMIT' ? rows.slice(0, own.length) : rows.slice(1);
      this.sent = carried;
      return useStructuredResult ? { records: [], raw: [] } : [];
    }
  };
}

/**
 * `statement` with its `$1`, `$2`… replaced by literals, for the driver's simple-query protocol (several statements
 * in one round trip take no bound values): strings as the `pg` client's own `escapeLiteral` writes them, finite
 * numbers, bigints and booleans as such, null as NULL. Anything else is refused: the library's statements bind
 * nothing else.
 */
function inlined(client: PgClient, statement: OutboxStatement): string {
  const params = statement.params ?? [];
  return statement.sql.replace(/\$(\d+)/g, (_, n: string) => literal(client, params[Number(n) - 1]));
}

/** `value` as an SQL literal: see `inlined`. */
function literal(client: PgClient, value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'string') return client.escapeLiteral(value);
  if (typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  throw new TypeError(`A statement sent with BEGIN or COMMIT binds a ${typeof value}; only strings and numbers.`);
}
