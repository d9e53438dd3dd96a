/**
 * claim-scale: the cost of one claim (500 rows, half of them keyed) with 10,000 and then 1,000,000 rows of
 * sent/dead history in the table (the history is keyed too, so the per-key checks meet it). Baseline: the 10,000
 * row measurement of the same run. Then the library's publisher drains 20,000 pending rows over the 1,000,000-row
 * table while its heap is sampled: memory must stay flat while draining.
 */
import type { ClientProxy } from '@nestjs/microservices';
import { performance } from 'node:perf_hooks';
import { DataSource } from 'typeorm';
import { OutboxKeyLock, OutboxMessage, OutboxPublisher } from '../src';
import { PostgresOutboxDialect } from '../src/dialects/postgres.dialect';
import { median, type Bench } from './bench-kit';
import { createBenchDatabase, deleteQueue, PG, pgClient, sleep, startOutboxApp, uniqueName } from './relay-support';

const CLAIM = 500;
const PENDING = 5_000;
const ROUNDS = 3;
const DRAIN = 20_000;

/**
 * Inserts `count` rows with the given status, in chunks; every other row keyed k0..k998 unless `keyed` is false
 * (dead rows are inserted unkeyed: a dead row blocks its key by design).
 */
async function insertKeyed(client: import('pg').Client, count: number, status: string, keyed = status !== 'dead'): Promise<void> {
  for (let done = 0; done < count; done += 200_000) {
    const n = Math.min(200_000, count - done);
    await client.query(
      `INSERT INTO outbox_messages (message_id, pattern, payload, headers, ordering_key, status, attempts, available_at, created_at, sent_at)
       SELECT gen_random_uuid()::text, '${status === 'pending' ? 'bench.pending' : 'bench.history'}', '{"n":' || g || ',"pad":"' || repeat('x', 180) || '"}', NULL,
              CASE WHEN ${keyed ? 'g % 2 = 0' : 'false'} THEN 'k' || (g % 1000) END, $2, ${status === 'pending' ? 0 : 1},
              (extract(epoch from now()) * 1000)::bigint, (extract(epoch from now()) * 1000)::bigint,
              ${status === 'sent' ? '(extract(epoch from now()) * 1000)::bigint' : 'NULL'}
       FROM generate_series(1, $1::int) g`,
      [n, status],
    );
  }
}

/** Median milliseconds of one claim of CLAIM rows, over ROUNDS × (PENDING / CLAIM) claims. */
async function measureClaims(ds: DataSource): Promise<number> {
  const dialect = new PostgresOutboxDialect();
  const times: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    await ds.query(
      `UPDATE outbox_messages SET status = 'pending', sent_at = NULL, claimed_by = NULL, claimed_until = NULL, attempts = 0 WHERE pattern = 'bench.pending'`,
    );
    await ds.query('VACUUM ANALYZE outbox_messages');
    for (let i = 0; i < PENDING / CLAIM; i++) {
      const owner = `bench-${round}-${i}`;
      const started = performance.now();
      const rows = await dialect.claim(ds.manager, { table: 'outbox_messages', owner, limit: CLAIM, leaseMs: 60_000 });
      times.push(performance.now() - started);
      if (rows.length === 0) throw new Error('claim-scale: nothing claimed');
      // Published: the next claim may take the following rows of the same keys.
      await dialect.markSent(ds.manager, 'outbox_messages', owner, rows.map((r) => r.seq));
    }
  }
  return median(times);
}

const bench: Bench = async () => {
  const db = await createBenchDatabase();
  const pg = await pgClient(db.name);
  const ds = new DataSource({ type: 'postgres', ...PG, username: 'postgres', database: db.name, entities: [OutboxMessage, OutboxKeyLock] });
  await ds.initialize();
  try {
    // 10,000 history rows (95 % sent, 5 % dead) + the pending rows to claim.
    await insertKeyed(pg, 9_500, 'sent');
    await insertKeyed(pg, 500, 'dead');
    await insertKeyed(pg, PENDING, 'pending');
    await pg.query('VACUUM ANALYZE outbox_messages');
    const small = await measureClaims(ds);

    // Grow the history to 1,000,000 rows; the pending rows stay the same.
    await pg.query(`DELETE FROM outbox_messages WHERE pattern = 'bench.pending'`);
    await insertKeyed(pg, 940_500, 'sent');
    await insertKeyed(pg, 49_500, 'dead');
    await insertKeyed(pg, PENDING, 'pending');
    await pg.query('VACUUM ANALYZE outbox_messages');
    const large = await measureClaims(ds);

    // Memory while the publisher drains DRAIN rows over the large table.
    await pg.query(`DELETE FROM outbox_messages WHERE pattern = 'bench.pending'`);
    await insertKeyed(pg, DRAIN, 'pending');
    await pg.query('VACUUM ANALYZE outbox_messages');
    const queue = uniqueName('bench-claim-scale');
    const app = await startOutboxApp(db.name, queue, { publisher: { enabled: false } });
    const heap: number[] = [];
    let drainedPerS = 0;
    try {
      await app.get<ClientProxy>('BROKER').connect();
      (global as { gc?: () => void }).gc?.();
      heap.push(process.memoryUsage().heapUsed);
      const sampler = setInterval(() => heap.push(process.memoryUsage().heapUsed), 50);
      const started = performance.now();
      const published = await app.get(OutboxPublisher).flush();
      drainedPerS = published / ((performance.now() - started) / 1000);
      clearInterval(sampler);
      await sleep(10);
    } finally {
      await app.close();
      await deleteQueue(queue);
    }
    const mb = (bytes: number) => Number((bytes / 1024 / 1024).toFixed(1));
    const heapStart = heap[0];
    const heapMax = Math.max(...heap);
    const ratio = large / small;
    return {
      table: [
        { history: '10,000 rows', 'claim of 500 (median ms)': Number(small.toFixed(2)) },
        { history: '1,000,000 rows', 'claim of 500 (median ms)': Number(large.toFixed(2)) },
        { history: `drain ${DRAIN} rows over 1M: heap start / max MB`, 'claim of 500 (median ms)': `${mb(heapStart)} / ${mb(heapMax)} (${Math.round(drainedPerS)} msg/s)` },
      ],
      fields: {
        claim_10k_ms: Number(small.toFixed(3)),
        claim_1m_ms: Number(large.toFixed(3)),
        ratio_1m_vs_10k: Number(ratio.toFixed(3)),
        drain_rows: DRAIN,
        drain_heap_start_mb: mb(heapStart),
        drain_heap_max_mb: mb(heapMax),
        drain_heap_growth_mb: mb(heapMax - heapStart),
      },
    };
  } finally {
    await ds.destroy();
    await pg.end();
    await db.drop();
  }
};

export default bench;
