/**
 * relay-wal: the WAL relay (`publisher.mode: 'wal'`, PostgreSQL logical decoding) beside the polling relay, on the
 * second cluster (`wal_level = logical`, port 5433, .ci/pg-logical.sh). Rows arrive while the relay runs: ROWS rows
 * inserted 500 per statement as fast as the database takes them, with the relay already started (the WAL relay
 * streams only rows written after its slot exists). Each mode is timed from the first insert to the last `sent_at`
 * on the database clock. The broker alone (raw amqplib, 500 per confirm wait, no database) is the physical limit
 * (`ratio_vs_broker`). Rounds alternate (poll, wal, broker, …); each side's best round is reported.
 */
import type { INestApplicationContext } from '@nestjs/common';
import { OutboxPublisher } from '../src';
import type { Bench } from './bench-kit';
import { brokerOnly } from './relay.bench';
import {
  createBenchDatabase,
  deleteQueue,
  insertRows,
  PG_LOGICAL,
  pgClient,
  sleep,
  startOutboxApp,
  uniqueName,
} from './relay-support';

const ROWS = Number(process.env.RELAY_BENCH_ROWS ?? 50_000);
const ROUNDS = Number(process.env.RELAY_BENCH_ROUNDS ?? 2);
const CHUNK = 500;

async function liveRelay(database: string, queue: string, mode: 'poll' | 'wal'): Promise<number> {
  const pg = await pgClient(database, PG_LOGICAL);
  let app: INestApplicationContext | undefined;
  try {
    await pg.query('TRUNCATE outbox_messages CASCADE');
    app = await startOutboxApp(database, queue, { publisher: { mode } }, PG_LOGICAL);
    await app.init();
    const publisher = app.get(OutboxPublisher);
    while (mode === 'wal' && publisher.walState !== 'streaming') await sleep(50);
    const { rows } = await pg.query(`SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint AS t`);
    const started = Number(rows[0].t);
    for (let n = 0; n < ROWS; n += CHUNK) await insertRows(pg, Math.min(CHUNK, ROWS - n));
    for (;;) {
      const { rows: left } = await pg.query(`SELECT count(*)::int AS n FROM outbox_messages WHERE status = 'pending'`);
      if (left[0].n === 0) break;
      await sleep(100);
    }
    const { rows: end } = await pg.query(
      `SELECT max(sent_at)::bigint AS t, count(*)::int AS n FROM outbox_messages WHERE status = 'sent'`,
    );
    return Number(end[0].n) / ((Number(end[0].t) - started) / 1000);
  } finally {
    await app?.close();
    await pg.end();
  }
}

const bench: Bench = async () => {
  const db = await createBenchDatabase(PG_LOGICAL);
  const poll: number[] = [];
  const wal: number[] = [];
  const broker: number[] = [];
  try {
    const queue = uniqueName('bench-relay-wal');
    for (let round = 0; round < ROUNDS; round++) {
      poll.push(await liveRelay(db.name, `${queue}-poll`, 'poll'));
      await deleteQueue(`${queue}-poll`);
      wal.push(await liveRelay(db.name, `${queue}-wal`, 'wal'));
      await deleteQueue(`${queue}-wal`);
      broker.push(await brokerOnly(`${queue}-broker`));
      await deleteQueue(`${queue}-broker`);
    }
  } finally {
    await db.drop();
  }
  const best = (values: number[]) => Math.max(...values);
  const [p, w, k] = [best(poll), best(wal), best(broker)];
  const rows = (values: number[], relay: string) =>
    values.map((v, i) => ({ round: i + 1, relay, 'msg/s': Math.round(v) }));
  return {
    table: [
      ...rows(poll, "nestjs-outbox publisher, mode 'poll' (rows arriving live)"),
      ...rows(wal, "nestjs-outbox publisher, mode 'wal' (rows arriving live)"),
      ...rows(broker, 'broker only: raw amqplib, 500 per confirm wait, no database'),
    ],
    fields: {
      rows: ROWS,
      poll_msgs_per_s: Math.round(p),
      wal_msgs_per_s: Math.round(w),
      broker_msgs_per_s: Math.round(k),
      ratio_wal_vs_poll: Number((w / p).toFixed(3)),
      ratio_vs_broker: Number((w / k).toFixed(3)),
      poll_ratio_vs_broker: Number((p / k).toFixed(3)),
    },
  };
};

export default bench;
