import { DataSource, QueryFailedError, QueryRunner } from 'typeorm';
import type { OutboxStatement } from './transaction.types';

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
    carryingClasses.set(dataSource, (Carrying = carryingClassOf(base)));
  }
  const runner = new Carrying(dataSource.driver, 'master');
  Object.assign(runner, { manager: dataSource.createEntityManager(runner) });
  return runner;
}

function carryingClassOf(Base: RunnerClass) {
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

    async query(sql: string, parameters?: unknown[], useStructuredResult?: boolean): Promise<any> {
      const carried = this.pending;
      if (!carried || sql !== carried.keyword || (parameters && parameters.length > 0)) {
        return super.query(sql, parameters, useStructuredResult as any);
      }
      this.pending = undefined;
      const client = (await this.connect()) as PgClient;
      const own = carried.statements.map((statement) => inlined(client, statement));
      // BEGIN first, its statements after it; COMMIT last, its statements before it.
      const text = (carried.keyword === 'COMMIT' ? [...own, sql] : [sql, ...own]).join(';\n');
      let results: PgResult[];
      try {
        const answer = await client.query({ text, query_timeout: carried.timeoutMs });
        results = Array.isArray(answer) ? answer : [answer];
      } catch (error) {
        if (error instanceof Error && /Query read timeout/i.test(error.message)) this.broken = error;
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
  return statement.sql.replace(/\$(\d+)/g, (_, n: string) => {
    const value = params[Number(n) - 1];
    if (value === null || value === undefined) return 'NULL';
    if (typeof value === 'string') return client.escapeLiteral(value);
    if (typeof value === 'bigint' || typeof value === 'boolean') return String(value);
    if (typeof value === 'number' && Number.isFinite(value)) return String(value);
    throw new TypeError(`A statement sent with BEGIN or COMMIT binds a ${typeof value}; only strings and numbers.`);
  });
}
