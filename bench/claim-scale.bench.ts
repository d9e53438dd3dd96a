/**
 * claim-scale: the cost of one claim (500 rows, half of them keyed) with 10,000 and then 1,000,000 rows of
 * sent/dead history in the table (the history is keyed too, so the per-key checks meet it), in two databases
 * measured in interleaved rounds. Baseline: the 10,000-row measurement of the same run. Then the library's publisher drains 20,000 pending rows over the 1,000,000-row
 * table while its heap is sampled: memory must stay flat while draining.
 */
import type { ClientProxy } from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { DataSource } from 'typeorm';
import { OutboxKeyLock, OutboxMessage, OutboxPublisher } from '../src';
import { PostgresOutboxDialect } from '../src/dialects/postgres/postgres.dialect';
import { median, type Bench } from './bench-kit';
import { createBenchDatabase, deleteQueue, PG, pgClient, startOutboxApp, uniqueName } from './relay-support';

/** A full garbage collection (via --expose-gc set at run time), or a no-op where that is refused. */
function exposeGc(): () => void {
  const existing = (global as { gc?: () => void }).gc;
  if (existing) return existing;
  try {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as () => void;
  } catch {
    return () => undefined;
  }
}

const CLAIM = 500;
const PENDING = 5_000;
const ROUNDS = 4;
const DRAIN = 20_000;

/**
 * Inserts `count` rows with the given status, in chunks; every other row keyed k0..k998 unless `keyed` is false
 * (dead rows are inserted unkeyed: a dead row blocks its key by design).
 */
async function insertKeyed(
  client: import('pg').Client,
  count: number,
  status: string,
  keyed = status !== 'dead',
): Promise<void> {
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

/** Milliseconds of each claim of CLAIM rows in one round (PENDING / CLAIM claims, after resetting the rows). */
async function measureClaims(ds: DataSource): Promise<number[]> {
  const dialect = new PostgresOutboxDialect();
  const times: number[] = [];
  await ds.query(
    `UPDATE outbox_messages SET status = 'pending', sent_at = NULL, claimed_by = NULL, claimed_until = NULL, attempts = 0 WHERE pattern = 'bench.pending'`,
  );
  await ds.query('VACUUM ANALYZE outbox_messages');
  for (let i = 0; i < PENDING / CLAIM; i++) {
    const owner = randomUUID();
    const started = performance.now();
    const rows = await dialect.claim(ds.manager, { table: 'outbox_messages', owner, limit: CLAIM, leaseMs: 60_000 });
    times.push(performance.now() - started);
    if (rows.length === 0) throw new Error('claim-scale: nothing claimed');
    // Published: the next claim may take the following rows of the same keys.
    await dialect.markSent(
      ds.manager,
      'outbox_messages',
      owner,
      rows.map((r) => r.seq),
    );
  }
  return times;
}

/** A scratch database holding `history` sent/dead rows (95 % / 5 %) plus PENDING rows to claim. */
async function prepare(history: number) {
  const db = await createBenchDatabase();
  const pg = await pgClient(db.name);
  await insertKeyed(pg, Math.round(history * 0.95), 'sent');
  await insertKeyed(pg, Math.round(history * 0.05), 'dead');
  await insertKeyed(pg, PENDING, 'pending');
  await pg.query('VACUUM ANALYZE outbox_messages');
  const ds = new DataSource({
    type: 'postgres',
    ...PG,
    username: 'postgres',
    database: db.name,
    entities: [OutboxMessage, OutboxKeyLock],
  });
  await ds.initialize();
  return { db, pg, ds };
}

const bench: Bench = async () => {
  const smallDb = await prepare(10_000);
  const largeDb = await prepare(1_000_000);
  const { db, pg } = largeDb;
  try {
    // Interleaved rounds, so the machine's load drifts over both sides alike.
    const smallTimes: number[] = [];
    const largeTimes: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      smallTimes.push(...(await measureClaims(smallDb.ds)));
      largeTimes.push(...(await measureClaims(largeDb.ds)));
    }
    const small = median(smallTimes);
    const large = median(largeTimes);

    // Memory while the publisher drains DRAIN rows over the large table.
    await pg.query(`DELETE FROM outbox_messages WHERE pattern = 'bench.pending'`);
    await insertKeyed(pg, DRAIN, 'pending');
    await pg.query('VACUUM ANALYZE outbox_messages');
    const queue = uniqueName('bench-claim-scale');
    const app = await startOutboxApp(db.name, queue, { publisher: { enabled: false } });
    // Heap after a full GC, every 2,000 rows drained: flat means the last sample is close to the first.
    const gc = exposeGc();
    const heap: number[] = [];
    let drainedPerS = 0;
    try {
      await app.get<ClientProxy>('BROKER').connect();
      const publisher = app.get(OutboxPublisher);
      gc();
      heap.push(process.memoryUsage().heapUsed);
      const started = performance.now();
      let published = 0;
      let passes = 0;
      for (;;) {
        const result = await publisher.runPass();
        if (result.claimed === 0) break;
        published += result.published;
        if (++passes % 4 === 0) {
          gc();
          heap.push(process.memoryUsage().heapUsed);
        }
      }
      drainedPerS = published / ((performance.now() - started) / 1000);
      gc();
      heap.push(process.memoryUsage().heapUsed);
    } finally {
      await app.close();
      await deleteQueue(queue);
    }
    const mb = (bytes: number) => Number((bytes / 1024 / 1024).toFixed(1));
    const heapStart = heap[0];
    const heapMax = Math.max(...heap);
    const heapEnd = heap[heap.length - 1];
    const ratio = large / small;
    return {
      table: [
        { history: '10,000 rows', 'claim of 500 (median ms)': Number(small.toFixed(2)) },
        { history: '1,000,000 rows', 'claim of 500 (median ms)': Number(large.toFixed(2)) },
        {
          history: `drain ${DRAIN} rows over 1M: heap after GC start / max / end MB`,
          'claim of 500 (median ms)': `${mb(heapStart)} / ${mb(heapMax)} / ${mb(heapEnd)} (${Math.round(drainedPerS)} msg/s)`,
        },
      ],
      fields: {
        claim_10k_ms: Number(small.toFixed(3)),
        claim_1m_ms: Number(large.toFixed(3)),
        ratio_1m_vs_10k: Number(ratio.toFixed(3)),
        drain_rows: DRAIN,
        drain_heap_start_mb: mb(heapStart),
        drain_heap_max_mb: mb(heapMax),
        drain_heap_end_mb: mb(heapEnd),
        drain_heap_growth_mb: mb(heapEnd - heapStart),
      },
    };
  } finally {
    for (const side of [smallDb, largeDb]) {
      await side.ds.destroy();
      await side.pg.end();
      await side.db.drop();
    }
  }
};

export default bench;
