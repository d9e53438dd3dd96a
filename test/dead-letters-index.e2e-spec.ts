import { DataSource } from 'typeorm';
import { OutboxMessage } from '../src';
import { OutboxAttempt } from '../src/schema/outbox-attempt.entity';
import { OutboxKeyLock } from '../src/schema/outbox-key-lock.entity';
import type { DeadRowsQuery } from '../src/dialects/outbox-dialect';
import { resolveDialect } from '../src/dialects/resolve-dialect';
import { OUTBOX_TABLE } from '../src/outbox.constants';
import { DATABASE_LABEL } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

const ROWS = 200_000;

/**
 * The dead letters' keyset page is one backward range scan of IDX_outbox_messages_dead on PostgreSQL, however deep
 * the cursor: no sequential scan, no sort, whatever the share of sent rows in the table. Checked on the plan of the
 * exact statement the dialect sends, over 200,000 rows (half dead, half sent) with fresh statistics.
 */
describeWith(['postgres'], `Dead-letter pages use the dead index on ${DATABASE_LABEL.postgres}`, () => {
  const fx = useTestDatabase('postgres');
  let ds: DataSource;

  beforeAll(async () => {
    ds = new DataSource({
      ...fx.db.options,
      entities: [OutboxMessage, OutboxKeyLock, OutboxAttempt],
      synchronize: true,
      logging: false,
    } as never);
    await ds.initialize();
    fx.defer(() => ds.destroy());
    await ds.query(
      `INSERT INTO outbox_messages (message_id, pattern, payload, status, attempts, available_at, created_at, dead_at, sent_at)
       SELECT 'm-' || i, CASE WHEN i % 3 = 0 THEN 'Invoice' ELSE 'Order' END, '{}',
              CASE WHEN i % 2 = 0 THEN 'dead' ELSE 'sent' END, 1, i, i,
              CASE WHEN i % 2 = 0 THEN 1000000 + i / 4 ELSE 0 END, CASE WHEN i % 2 = 0 THEN NULL ELSE i END
       FROM generate_series(1, ${ROWS}) AS g(i)`,
    );
    await ds.query('ANALYZE outbox_messages');
  }, 120_000);

  /** The plan of the statement `listDead()` sends for `query`, as PostgreSQL's JSON plan. */
  async function planOf(query: DeadRowsQuery): Promise<string> {
    const dialect = resolveDialect(ds);
    const sent: Array<{ sql: string; params: unknown[] }> = [];
    const execute = dialect.execute.bind(dialect);
    dialect.execute = (manager, sql, params = [], options) => {
      sent.push({ sql, params });
      return execute(manager, sql, params, options);
    };
    const rows = await dialect.listDead(ds.manager, OUTBOX_TABLE, query);
    expect(rows.length).toBe(query.limit);
    expect(sent).toHaveLength(1);
    const [result] = await ds.query(`EXPLAIN (FORMAT JSON) ${sent[0].sql}`, sent[0].params);
    await dialect.dispose(ds);
    return JSON.stringify(result['QUERY PLAN']);
  }

  it('PostgreSQL: a deep keyset page is an index range scan of IDX_outbox_messages_dead (no seq scan, no sort)', async () => {
    const plan = await planOf({ filter: {}, after: { deadAt: 1_010_000, seq: '40000' }, limit: 50 });
    expect(plan).toContain('"Index Name":"IDX_outbox_messages_dead"');
    expect(plan).toContain('"Scan Direction":"Backward"');
    // The cursor bounds the range itself (an index condition), so a deep page does not read the pages before it.
    expect(plan).toMatch(/"Index Cond":"[^"]*ROW\(dead_at, seq\) < ROW\(1010000, 40000\)/);
    expect(plan).not.toContain('Seq Scan');
    expect(plan).not.toContain('"Node Type":"Sort"');
  });

  it('PostgreSQL: a filtered page (pattern, death time range) walks the same index', async () => {
    const plan = await planOf({
      filter: { pattern: 'Invoice', deadSince: 1_005_000, deadBefore: 1_040_000 },
      after: { deadAt: 1_030_000, seq: '120000' },
      limit: 20,
    });
    expect(plan).toContain('"Index Name":"IDX_outbox_messages_dead"');
    expect(plan).toMatch(/"Index Cond":"[^"]*ROW\(dead_at, seq\) < ROW\(1030000, 120000\)/);
    expect(plan).not.toContain('Seq Scan');
    expect(plan).not.toContain('"Node Type":"Sort"');
  });
});

/** Captures the statement `listDead()` sends, runs it, and returns it with its parameters. */
async function statementOf(
  ds: DataSource,
  query: DeadRowsQuery,
): Promise<{ sql: string; params: unknown[]; rows: number }> {
  const dialect = resolveDialect(ds);
  const sent: Array<{ sql: string; params: unknown[] }> = [];
  const execute = dialect.execute.bind(dialect);
  dialect.execute = (manager, sql, params = [], options) => {
    sent.push({ sql, params });
    return execute(manager, sql, params, options);
  };
  const rows = await dialect.listDead(ds.manager, OUTBOX_TABLE, query);
  return { ...sent[sent.length - 1], rows: rows.length };
}

const MARIADB_ROWS = 50_000;

/**
 * MariaDB's cost model would read every dead row above the cursor (`ref` on status); the dialect forces the dead
 * index so a deep page is a range read of `limit` rows — and falls back to no hint when the index is missing.
 */
describeWith(['mariadb'], `Dead-letter pages use the dead index on ${DATABASE_LABEL.mariadb}`, () => {
  const fx = useTestDatabase('mariadb');
  let ds: DataSource;

  beforeAll(async () => {
    ds = new DataSource({
      ...fx.db.options,
      entities: [OutboxMessage, OutboxKeyLock, OutboxAttempt],
      synchronize: true,
      logging: false,
    } as never);
    await ds.initialize();
    fx.defer(() => ds.destroy());
    await ds.query(
      `INSERT INTO outbox_messages (message_id, pattern, payload, status, attempts, available_at, created_at, dead_at)
       SELECT CONCAT('m-', seq), 'Order', '{}', 'dead', 1, seq, seq, 1000000 + seq DIV 4 FROM seq_1_to_${MARIADB_ROWS}`,
    );
    await ds.query('ANALYZE TABLE outbox_messages');
  }, 120_000);

  it('MariaDB: a deep keyset page reads only its rows through a range of IDX_outbox_messages_dead', async () => {
    const query = { filter: {}, after: { deadAt: 1_006_250, seq: '25000' }, limit: 50 };
    const { sql, params, rows } = await statementOf(ds, query);
    expect(rows).toBe(50);
    const [result] = await ds.query(`ANALYZE FORMAT=JSON ${sql}`, params);
    const plan = JSON.parse(String(Object.values(result)[0]));
    const table = plan.query_block.table ?? plan.query_block.nested_loop?.[0]?.table;
    expect(table).toMatchObject({ access_type: 'range', key: 'IDX_outbox_messages_dead' });
    expect(table.r_rows).toBeLessThanOrEqual(51);
  });

  it('MariaDB: without the dead index (a hand-made schema) pages still work, without the hint', async () => {
    await ds.query('DROP INDEX `IDX_outbox_messages_dead` ON `outbox_messages`');
    const dialect = resolveDialect(ds);
    const page = await dialect.listDead(ds.manager, OUTBOX_TABLE, { filter: {}, limit: 3 });
    expect(page.map((r) => r.seq)).toEqual([String(MARIADB_ROWS), String(MARIADB_ROWS - 1), String(MARIADB_ROWS - 2)]);
  });
});

/** SQLite walks the dead index backwards for a keyset page: no temporary B-tree for the order. */
describeWith([], `Dead-letter pages use the dead index on ${DATABASE_LABEL.sqlite}`, () => {
  const fx = useTestDatabase('sqlite');
  let ds: DataSource;

  beforeAll(async () => {
    ds = new DataSource({
      ...fx.db.options,
      entities: [OutboxMessage, OutboxKeyLock, OutboxAttempt],
      synchronize: true,
      logging: false,
    } as never);
    await ds.initialize();
    fx.defer(() => ds.destroy());
    await ds.query(
      `WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < 20000)
       INSERT INTO outbox_messages (message_id, pattern, payload, status, attempts, available_at, created_at, dead_at)
       SELECT 'm-' || i, 'Order', '{}', CASE WHEN i % 2 = 0 THEN 'dead' ELSE 'sent' END, 1, i, i,
              CASE WHEN i % 2 = 0 THEN 1000000 + i / 4 ELSE 0 END FROM g`,
    );
    await ds.query('ANALYZE');
  });

  it('SQLite (better-sqlite3): a keyset page searches IDX_outbox_messages_dead and needs no sort', async () => {
    const { sql, params, rows } = await statementOf(ds, {
      filter: {},
      after: { deadAt: 1_002_500, seq: '10000' },
      limit: 50,
    });
    expect(rows).toBe(50);
    const plan = (await ds.query(`EXPLAIN QUERY PLAN ${sql}`, params)).map((r: { detail: string }) => r.detail);
    expect(plan.join('\n')).toMatch(/SEARCH outbox_messages USING (COVERING )?INDEX IDX_outbox_messages_dead/);
    expect(plan.join('\n')).not.toContain('TEMP B-TREE');
  });
});
