/**
 * backlog: a backlog left by an outage drains at full speed. The library's publisher (defaults) starts on a table
 * holding 1,000,000 pending rows and on one holding 10,000 (two rounds before and two after the large one, on the
 * same database), PostgreSQL → RabbitMQ (persistent, confirmed). Throughput is counted from the first row marked
 * sent to the last (so start-up costs the two sizes alike); the heap after a full GC is sampled every 5 s and at
 * the end. Baseline: the median of the 10,000-row rounds of the same run.
 */
import { performance } from 'node:perf_hooks';
import { median, type Bench } from './bench-kit';
import { exposeGc, heapAfterGc } from './heap-sampler';
import {
  createBenchDatabase,
  deleteQueue,
  insertRows,
  pgClient,
  sleep,
  startOutboxApp,
  uniqueName,
} from './relay-support';

const LARGE = Number(process.env.BACKLOG_BENCH_ROWS ?? 1_000_000);
const SMALL = 10_000;
const HEAP_EVERY_MS = 5_000;

interface Drain {
  rows: number;
  perS: number;
  heap: number[];
}

async function drain(database: string, rows: number): Promise<Drain> {
  const pg = await pgClient(database);
  const queue = uniqueName('bench-backlog');
  const gc = exposeGc();
  try {
    await pg.query('TRUNCATE outbox_messages CASCADE');
    await insertRows(pg, rows, 'pending', null, 'ordered');
    await pg.query('VACUUM ANALYZE outbox_messages');
    const heap = [heapAfterGc(gc)];
    const app = await startOutboxApp(database, queue);
    try {
      let sampled = performance.now();
      for (;;) {
        await sleep(rows > SMALL ? 1000 : 100);
        if (performance.now() - sampled >= HEAP_EVERY_MS) {
          heap.push(heapAfterGc(gc));
          sampled = performance.now();
        }
        const { rows: left } = await pg.query(
          `SELECT EXISTS (SELECT 1 FROM outbox_messages WHERE status = 'pending') AS any`,
        );
        if (!left[0].any) break;
      }
      heap.push(heapAfterGc(gc));
    } finally {
      await app.close();
    }
    const { rows: span } = await pg.query(
      `SELECT count(*)::int AS n, min(sent_at)::bigint AS first, max(sent_at)::bigint AS last
       FROM outbox_messages WHERE status = 'sent'`,
    );
    const { n, first, last } = span[0];
    if (Number(n) !== rows) throw new Error(`backlog: ${n} of ${rows} rows sent`);
    return { rows, perS: Number(n) / (Math.max(1, Number(last) - Number(first)) / 1000), heap };
  } finally {
    await pg.end();
    await deleteQueue(queue);
  }
}

const bench: Bench = async () => {
  const db = await createBenchDatabase();
  try {
    const small: Drain[] = [];
    small.push(await drain(db.name, SMALL), await drain(db.name, SMALL));
    const large = await drain(db.name, LARGE);
    small.push(await drain(db.name, SMALL), await drain(db.name, SMALL));
    const base = median(small.map((d) => d.perS));
    const mb = (bytes: number) => Number((bytes / 1024 / 1024).toFixed(1));
    const heap = large.heap;
    return {
      table: [
        ...small.map((d, i) => ({
          backlog: `${SMALL.toLocaleString('en')} rows (round ${i + 1})`,
          'msg/s': Math.round(d.perS),
          'heap after GC start / max / end MB': `${mb(d.heap[0])} / ${mb(Math.max(...d.heap))} / ${mb(d.heap[d.heap.length - 1])}`,
        })),
        {
          backlog: `${LARGE.toLocaleString('en')} rows`,
          'msg/s': Math.round(large.perS),
          'heap after GC start / max / end MB': `${mb(heap[0])} / ${mb(Math.max(...heap))} / ${mb(heap[heap.length - 1])}`,
        },
      ],
      fields: {
        rows_small: SMALL,
        rows_large: LARGE,
        small_msgs_per_s: Math.round(base),
        large_msgs_per_s: Math.round(large.perS),
        ratio_1m_vs_10k: Number((large.perS / base).toFixed(3)),
        heap_start_mb: mb(heap[0]),
        heap_max_mb: mb(Math.max(...heap)),
        heap_end_mb: mb(heap[heap.length - 1]),
        heap_samples: heap.length,
      },
    };
  } finally {
    await db.drop();
  }
};

export default bench;
