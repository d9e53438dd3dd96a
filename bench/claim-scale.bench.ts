/**
 * claim-scale: the cost of one claim (500 rows, half of them keyed) with 10,000 and then 1,000,000 rows of
 * sent/dead history in the table (the history is keyed too, so the per-key checks meet it), on PostgreSQL and on
 * MariaDB, each measured in interleaved rounds. Baseline: the 10,000-row measurement of the same run and database.
 * The plan of one claim at each size is printed (`EXPLAIN (ANALYZE, BUFFERS)` on PostgreSQL, `ANALYZE` on MariaDB).
 * Then the library's publisher drains 20,000 pending rows over the 1,000,000-row PostgreSQL table while its heap is
 * sampled: memory must stay flat while draining.
 */
import type { ClientProxy } from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { OutboxPublisher } from '../src';
import { median, type Bench } from './bench-kit';
import { analyze, BenchDatabaseKind, claimPlan, createDatabase, SeededDatabase, seedRows } from './claim-scale-db';
import { exposeGc } from './heap-sampler';
import { deleteQueue, startOutboxApp, uniqueName } from './relay-support';

const CLAIM = 500;
const PENDING = 5_000;
const ROUNDS = Number(process.env.CLAIM_SCALE_ROUNDS ?? 4);
const DRAIN = 20_000;
const LARGE = Number(process.env.CLAIM_SCALE_HISTORY ?? 1_000_000);
const KINDS = (process.env.CLAIM_SCALE_DATABASES ?? 'postgres,mariadb').split(',') as BenchDatabaseKind[];

/** Milliseconds of each claim of CLAIM rows in one round (PENDING / CLAIM claims, after resetting the rows). */
async function measureClaims(db: SeededDatabase): Promise<number[]> {
  const { ds, dialect } = db;
  const times: number[] = [];
  await ds.query(
    `UPDATE outbox_messages SET status = 'pending', sent_at = NULL, claimed_by = NULL, claimed_until = NULL, attempts = 0 WHERE pattern = 'bench.pending'`,
  );
  await analyze(db);
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

/** A scratch database holding `history` sent/dead rows (95 % / 5 %; dead rows unkeyed) plus PENDING rows to claim. */
async function prepare(kind: BenchDatabaseKind, history: number): Promise<SeededDatabase> {
  const db = await createDatabase(kind);
  await seedRows(db, Math.round(history * 0.95), 'sent', 'bench.history', true, 'h');
  await seedRows(db, Math.round(history * 0.05), 'dead', 'bench.history', false, 'd');
  await seedRows(db, PENDING, 'pending', 'bench.pending', true, 'p');
  await analyze(db);
  return db;
}

/** Interleaved rounds on the two sizes of one database; the plans of one claim at each size, printed. */
async function claimScale(kind: BenchDatabaseKind) {
  const small = await prepare(kind, 10_000);
  const large = await prepare(kind, LARGE);
  try {
    const smallTimes: number[] = [];
    const largeTimes: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      smallTimes.push(...(await measureClaims(small)));
      largeTimes.push(...(await measureClaims(large)));
    }
    for (const [label, db] of [
      ['10,000', small],
      [LARGE.toLocaleString('en'), large],
    ] as const) {
      await db.ds.query(
        `UPDATE outbox_messages SET status = 'pending', sent_at = NULL, claimed_by = NULL, claimed_until = NULL, attempts = 0 WHERE pattern = 'bench.pending'`,
      );
      await analyze(db);
      console.log(`\n-- claim-scale ${kind}: plan of one claim of ${CLAIM} over ${label} history rows`);
      console.log(await claimPlan(db, CLAIM));
    }
    // PostgreSQL: memory while the library's publisher drains DRAIN rows over the large table.
    const drain = kind === 'postgres' ? await drainHeap(large) : undefined;
    return { small: median(smallTimes), large: median(largeTimes), drain };
  } finally {
    await small.drop();
    await large.drop();
  }
}

/** Heap after a full GC every 4 passes while the publisher drains DRAIN rows over a LARGE-row PostgreSQL table. */
async function drainHeap(db: SeededDatabase) {
  const queue = uniqueName('bench-claim-scale');
  await db.ds.query(`DELETE FROM outbox_messages WHERE pattern = 'bench.pending'`);
  await seedRows(db, DRAIN, 'pending', 'bench.pending', true, 'q');
  await analyze(db);
  const app = await startOutboxApp(String(db.ds.options.database), queue, { publisher: { enabled: false } });
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
  return { heap, drainedPerS };
}

const bench: Bench = async () => {
  const mb = (bytes: number) => Number((bytes / 1024 / 1024).toFixed(1));
  const table: Array<Record<string, string | number>> = [];
  const fields: Record<string, number | string> = {
    message_ids: process.env.CLAIM_SCALE_IDS === 'random' ? 'random' : 'time-ordered',
  };
  for (const kind of KINDS) {
    const { small, large, drain } = await claimScale(kind);
    const ratio = large / small;
    const prefix = kind === 'postgres' ? '' : `${kind}_`;
    table.push(
      { database: kind, history: '10,000 rows', 'claim of 500 (median ms)': Number(small.toFixed(2)) },
      {
        database: kind,
        history: `${LARGE.toLocaleString('en')} rows`,
        'claim of 500 (median ms)': Number(large.toFixed(2)),
      },
      { database: kind, history: 'ratio', 'claim of 500 (median ms)': Number(ratio.toFixed(3)) },
    );
    Object.assign(fields, {
      [`${prefix}claim_10k_ms`]: Number(small.toFixed(3)),
      [`${prefix}claim_1m_ms`]: Number(large.toFixed(3)),
      [`${prefix}ratio_1m_vs_10k`]: Number(ratio.toFixed(3)),
    });
    if (drain) {
      const { heap, drainedPerS } = drain;
      const [start, max, end] = [heap[0], Math.max(...heap), heap[heap.length - 1]];
      table.push({
        database: kind,
        history: `drain ${DRAIN} rows over ${LARGE.toLocaleString('en')}: heap after GC start / max / end MB`,
        'claim of 500 (median ms)': `${mb(start)} / ${mb(max)} / ${mb(end)} (${Math.round(drainedPerS)} msg/s)`,
      });
      Object.assign(fields, {
        drain_rows: DRAIN,
        drain_heap_start_mb: mb(start),
        drain_heap_max_mb: mb(max),
        drain_heap_end_mb: mb(end),
        drain_heap_growth_mb: mb(end - start),
      });
    }
  }
  return { table, fields };
};

export default bench;
