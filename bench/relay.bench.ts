/**
 * relay: drain 50,000 pending rows from PostgreSQL to RabbitMQ (persistent, confirmed) with
 *  (a) a hand-written relay — claim 500 rows FOR UPDATE SKIP LOCKED, publish them all on a confirm channel, wait for
 *      the confirms, one UPDATE by id list, commit — and
 *  (b) the library's publisher with its default settings, in an app started on the filled table (timed from before
 *      the app starts, so connection setup counts against the library).
 *  (c) the broker alone: the same messages (same body, headers and size) sent to the same kind of queue with raw
 *      amqplib on a confirm channel, 500 at a time with one confirm wait per batch, and no database at all — the
 *      physical limit a relay can approach (`ratio_vs_broker`).
 * Rounds alternate (baseline, library, broker, …); each side's best round is reported.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Bench } from './bench-kit';
import { handWrittenRelay, libraryDrain } from './relay-drain';
import {
  AMQP_URL,
  createBenchDatabase,
  deleteQueue,
  insertRows,
  pgClient,
  startOutboxApp,
  uniqueName,
} from './relay-support';

const ROWS = Number(process.env.RELAY_BENCH_ROWS ?? 50_000);
const ROUNDS = Number(process.env.RELAY_BENCH_ROUNDS ?? 2);
const BATCH = 500;

/** The hand-written relay on RabbitMQ: each claimed batch sent on a confirm channel, one confirm wait. */
async function baselineRelay(database: string, queue: string): Promise<number> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const amqp = require('amqplib') as typeof import('amqplib');
  const connection = await amqp.connect(AMQP_URL);
  const channel = await connection.createConfirmChannel();
  await channel.assertQueue(queue, { durable: true });
  try {
    return await handWrittenRelay(database, async (rows) => {
      for (const row of rows) {
        const content = Buffer.from(JSON.stringify({ pattern: row.pattern, data: JSON.parse(row.payload) }));
        channel.sendToQueue(queue, content, {
          persistent: true,
          messageId: row.message_id,
          headers: { 'x-message-id': row.message_id },
        });
      }
      await channel.waitForConfirms();
    });
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/** The broker's own rate: ROWS messages like the relays', published 500 at a time on a confirm channel. */
export async function brokerOnly(queue: string): Promise<number> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const amqp = require('amqplib') as typeof import('amqplib');
  const connection = await amqp.connect(AMQP_URL);
  const channel = await connection.createConfirmChannel();
  await channel.assertQueue(queue, { durable: true });
  const pad = 'x'.repeat(180);
  try {
    const started = performance.now();
    for (let sent = 0; sent < ROWS; sent += BATCH) {
      for (let n = sent + 1; n <= Math.min(ROWS, sent + BATCH); n++) {
        const messageId = randomUUID();
        const content = Buffer.from(JSON.stringify({ pattern: 'bench.event', data: { n, pad } }));
        channel.sendToQueue(queue, content, { persistent: true, messageId, headers: { 'x-message-id': messageId } });
      }
      await channel.waitForConfirms();
    }
    return ROWS / ((performance.now() - started) / 1000);
  } finally {
    await connection.close().catch(() => undefined);
  }
}

const bench: Bench = async () => {
  const db = await createBenchDatabase();
  const baseline: number[] = [];
  const library: number[] = [];
  const broker: number[] = [];
  try {
    const queue = uniqueName('bench-relay');
    const pg = await pgClient(db.name);
    try {
      // Only one relay runs at a time: the library's app exists only during its own rounds.
      for (let round = 0; round < ROUNDS; round++) {
        await pg.query('TRUNCATE outbox_messages CASCADE');
        await insertRows(pg, ROWS);
        await pg.query('VACUUM ANALYZE outbox_messages');
        baseline.push(await baselineRelay(db.name, `${queue}-baseline`));
        await deleteQueue(`${queue}-baseline`);

        await pg.query('TRUNCATE outbox_messages CASCADE');
        await insertRows(pg, ROWS);
        await pg.query('VACUUM ANALYZE outbox_messages');
        library.push(await libraryDrain(db.name, () => startOutboxApp(db.name, queue)));
        await deleteQueue(queue);

        broker.push(await brokerOnly(`${queue}-broker`));
        await deleteQueue(`${queue}-broker`);
      }
    } finally {
      await pg.end();
    }
  } finally {
    await db.drop();
  }
  const best = (values: number[]) => Math.max(...values);
  const b = best(baseline);
  const l = best(library);
  const k = best(broker);
  return {
    table: [
      ...baseline.map((v, i) => ({
        round: i + 1,
        relay: 'hand-written (500, SKIP LOCKED, confirms)',
        'msg/s': Math.round(v),
      })),
      ...library.map((v, i) => ({ round: i + 1, relay: 'nestjs-outbox publisher (defaults)', 'msg/s': Math.round(v) })),
      ...broker.map((v, i) => ({
        round: i + 1,
        relay: 'broker only: raw amqplib, 500 per confirm wait, no database',
        'msg/s': Math.round(v),
      })),
    ],
    fields: {
      rows: ROWS,
      baseline_msgs_per_s: Math.round(b),
      library_msgs_per_s: Math.round(l),
      broker_msgs_per_s: Math.round(k),
      ratio: Number((l / b).toFixed(3)),
      ratio_vs_broker: Number((l / k).toFixed(3)),
    },
  };
};

export default bench;
