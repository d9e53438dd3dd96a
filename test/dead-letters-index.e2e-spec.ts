import { DataSource } from 'typeorm';
import { OutboxAttempt, OutboxKeyLock, OutboxMessage } from '../src';
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
