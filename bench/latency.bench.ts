/**
 * latency: commit → consumer receipt at 200 msg/s offered load, the library with its default settings
 * (pollingInterval 1000 ms: the commit wakes the publisher), PostgreSQL → RabbitMQ (persistent, confirmed).
 * Baseline: the same consumer, fed by a raw amqplib confirm channel at the same rate (the broker's own floor).
 */
import { performance } from 'node:perf_hooks';
import { OutboxService } from '../src';
import { percentile, type Bench } from './bench-kit';
import { AMQP_URL, createBenchDatabase, deleteQueue, sleep, startOutboxApp, uniqueName } from './relay-support';

const RATE = 200;
const MESSAGES = Number(process.env.LATENCY_BENCH_MESSAGES ?? 2000);
const WARMUP = 200;

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
  count: number,
  send: (i: number) => Promise<[string, number]>,
  sent: Map<string, number>,
): Promise<void> {
  const start = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    const due = start + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    inFlight.push(send(i).then(([id, t]) => void sent.set(id, t)));
  }
  await Promise.all(inFlight);
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

async function baseline(queue: string): Promise<number[]> {
  const received = new Map<string, number>();
  const stop = await startConsumer(queue, received);
  const connection = await amqp.connect(AMQP_URL);
  const channel = await connection.createConfirmChannel();
  const sent = new Map<string, number>();
  try {
    await offer(
      WARMUP + MESSAGES,
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
  return latencies(sent, received, WARMUP);
}

async function library(database: string, queue: string): Promise<number[]> {
  const received = new Map<string, number>();
  const stop = await startConsumer(queue, received);
  const app = await startOutboxApp(database, queue);
  const sent = new Map<string, number>();
  try {
    const outbox = app.get(OutboxService);
    await offer(
      WARMUP + MESSAGES,
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
  return latencies(sent, received, WARMUP);
}

const bench: Bench = async () => {
  const db = await createBenchDatabase();
  const queue = uniqueName('bench-latency');
  try {
    const base = await baseline(`${queue}-baseline`);
    await deleteQueue(`${queue}-baseline`);
    const lib = await library(db.name, queue);
    await deleteQueue(queue);
    const row = (name: string, v: number[]) => ({
      path: name,
      messages: v.length,
      'p50 ms': percentile(v, 50),
      'p90 ms': percentile(v, 90),
      'p99 ms': percentile(v, 99),
      'max ms': percentile(v, 100),
    });
    const r = (x: number) => Number(x.toFixed(2));
    return {
      table: [
        row('raw amqplib publish → consumer (floor)', base),
        row('commit → publisher → consumer (defaults)', lib),
      ],
      fields: {
        rate_per_s: RATE,
        messages: lib.length,
        baseline_p50_ms: r(percentile(base, 50)),
        baseline_p99_ms: r(percentile(base, 99)),
        p50_ms: r(percentile(lib, 50)),
        p99_ms: r(percentile(lib, 99)),
      },
    };
  } finally {
    await db.drop();
  }
};

export default bench;
