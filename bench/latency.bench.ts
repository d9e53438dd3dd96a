/**
 * latency (and latency-2k, the same at 2,000 msg/s): commit → consumer receipt at 200 msg/s offered load, the library with its default settings
 * (pollingInterval 1000 ms: the commit wakes the publisher), PostgreSQL → RabbitMQ (persistent, confirmed).
 * Baseline: the same consumer, fed by a raw amqplib confirm channel at the same rate (the broker's own floor).
 */
import { performance } from 'node:perf_hooks';
import { OutboxPublisher, OutboxService } from '../src';
import { percentile, type Bench } from './bench-kit';
import {
  AMQP_URL,
  createBenchDatabase,
  deleteQueue,
  PG,
  PG_LOGICAL,
  sleep,
  startOutboxApp,
  uniqueName,
} from './relay-support';

/** Offered load: rate per second, measured messages, and warm-up messages left out of the figures. */
export interface LatencyLoad {
  rate: number;
  messages: number;
  warmup: number;
}

// eslint-disable-next-line @typescript-eslint/no-require-imports
const amqp = require('amqplib') as typeof import('amqplib');

/** A consumer that stamps the receipt time of each message id. */
async function startConsumer(queue: string, received: Map<string, number>) {
  const connection = await amqp.connect(AMQP_URL);
  const channel = await connection.createChannel();
  await channel.assertQueue(queue, { durable: true });
  await channel.consume(queue, (msg) => {
    if (!msg) return;
    received.set(msg.properties.messageId, performance.now());
    channel.ack(msg);
  });
  return () => connection.close();
}

/** Sends `count` messages at RATE per second through `send`, which resolves with (id, commit time). */
async function offer(
  rate: number,
  count: number,
  send: (i: number) => Promise<[string, number]>,
  sent: Map<string, number>,
): Promise<number> {
  const start = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    inFlight.push(send(i).then(([id, t]) => void sent.set(id, t)));
  }
  await Promise.all(inFlight);
  return count / ((performance.now() - start) / 1000);
}

function latencies(sent: Map<string, number>, received: Map<string, number>, skip: number): number[] {
  const values: number[] = [];
  let index = 0;
  for (const [id, t] of sent) {
    if (index++ < skip) continue;
    const r = received.get(id);
    if (r !== undefined) values.push(Math.max(0, r - t));
  }
  return values;
}

async function waitAll(sent: Map<string, number>, received: Map<string, number>): Promise<void> {
  const deadline = performance.now() + 30_000;
  while ([...sent.keys()].some((id) => !received.has(id))) {
    if (performance.now() > deadline) throw new Error('latency bench: messages missing after 30 s');
    await sleep(20);
  }
}

async function baseline(queue: string, { rate, messages, warmup }: LatencyLoad) {
  const received = new Map<string, number>();
  const stop = await startConsumer(queue, received);
  const connection = await amqp.connect(AMQP_URL);
  const channel = await connection.createConfirmChannel();
  const sent = new Map<string, number>();
  let offered = 0;
  try {
    offered = await offer(
      rate,
      warmup + messages,
      (i) =>
        new Promise((resolve, reject) => {
          const id = `b-${i}`;
          const t = performance.now();
          channel.sendToQueue(
            queue,
            Buffer.from(JSON.stringify({ pattern: 'lat', data: { i } })),
            { persistent: true, messageId: id },
            (err) => (err ? reject(err) : resolve([id, t])),
          );
        }),
      sent,
    );
    await waitAll(sent, received);
  } finally {
    await connection.close();
    await stop();
  }
  return { values: latencies(sent, received, warmup), offered };
}

/** How the library's publisher finds new rows: polling (woken by the commit), or PostgreSQL's WAL stream. */
export type LatencyMode = 'poll' | 'wal';

async function library(database: string, queue: string, { rate, messages, warmup }: LatencyLoad, mode: LatencyMode) {
  const received = new Map<string, number>();
  const stop = await startConsumer(queue, received);
  const app =
    mode === 'wal'
      ? await startOutboxApp(database, queue, { publisher: { mode: 'wal' } }, PG_LOGICAL)
      : await startOutboxApp(database, queue);
  await app.init();
  while (mode === 'wal' && app.get(OutboxPublisher).walState !== 'streaming') await sleep(50);
  const sent = new Map<string, number>();
  let offered = 0;
  try {
    const outbox = app.get(OutboxService);
    offered = await offer(
      rate,
      warmup + messages,
      async (i) => {
        const id = await outbox.transaction(() => outbox.emit('lat', { i }));
        return [id, performance.now()];
      },
      sent,
    );
    await waitAll(sent, received);
  } finally {
    await app.close();
    await stop();
  }
  return { values: latencies(sent, received, warmup), offered };
}

/**
 * The latency benchmark at `load`: the raw-amqplib floor, then the library, in one run. `mode: 'wal'` runs the
 * library on the second cluster (`wal_level = logical`, port 5433, .ci/pg-logical.sh) with `publisher.mode: 'wal'`.
 */
export function latencyBench(load: LatencyLoad, name: string, mode: LatencyMode = 'poll'): Bench {
  return async () => {
    const db = await createBenchDatabase(mode === 'wal' ? PG_LOGICAL : PG);
    const queue = uniqueName(`bench-${name}`);
    try {
      const base = await baseline(`${queue}-baseline`, load);
      await deleteQueue(`${queue}-baseline`);
      const lib = await library(db.name, queue, load, mode);
      await deleteQueue(queue);
      const row = (path: string, { values: v, offered }: { values: number[]; offered: number }) => ({
        path,
        messages: v.length,
        'offered msg/s': Math.round(offered),
        'p50 ms': percentile(v, 50),
        'p90 ms': percentile(v, 90),
        'p99 ms': percentile(v, 99),
        'max ms': percentile(v, 100),
      });
      const r = (x: number) => Number(x.toFixed(2));
      return {
        table: [
          row('raw amqplib publish → consumer (floor)', base),
          row(
            mode === 'wal' ? "commit → WAL relay (mode 'wal') → consumer" : 'commit → publisher → consumer (defaults)',
            lib,
          ),
        ],
        fields: {
          mode,
          rate_per_s: load.rate,
          offered_per_s: Math.round(lib.offered),
          messages: lib.values.length,
          baseline_p50_ms: r(percentile(base.values, 50)),
          baseline_p99_ms: r(percentile(base.values, 99)),
          p50_ms: r(percentile(lib.values, 50)),
          p99_ms: r(percentile(lib.values, 99)),
        },
      };
    } finally {
      await db.drop();
    }
  };
}

export default latencyBench(
  { rate: 200, messages: Number(process.env.LATENCY_BENCH_MESSAGES ?? 2000), warmup: 200 },
  'latency',
);
