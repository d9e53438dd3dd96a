/**
 * relay-jetstream: drain pending rows from PostgreSQL into a NATS JetStream stream with
 *  (a) the library's publisher (defaults) through `OutboxJetStreamClient` — each message published with its
 *      `Nats-Msg-Id` and marked sent once its PubAck arrived — in an app started on the filled table (timed from
 *      before the app starts, so connection setup and the stream check count against the library), and
 *  (b) a raw JetStream publisher of the `nats` package: the same messages (same body, size and `Nats-Msg-Id`),
 *      published asynchronously 500 at a time with every PubAck awaited, and no database at all, and
 *  (c) a hand-written relay (claim 500 rows FOR UPDATE SKIP LOCKED, publish them all as in (b), one UPDATE by id
 *      list, commit): what the database work alone costs a relay.
 * `ratio_vs_raw` = library / raw (goal ≥ 0.85); `ratio` = library / hand-written relay. The raw publisher and the
 * hand-written relay use the `nats` package's connection defaults. Rounds alternate (raw, hand-written, library, …);
 * each side's best round counts.
 */
import { Module, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ClientProxy, ClientsModule } from '@nestjs/microservices';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { connect, nanos, NatsConnection } from 'nats';
import { OutboxJetStreamClient, OutboxModule } from '../src';
import type { Client } from 'pg';
import type { Bench } from './bench-kit';
import { handWrittenRelay, libraryDrain } from './relay-drain';
import { createBenchDatabase, insertRows, PG, pgClient, uniqueName } from './relay-support';

const ROWS = Number(process.env.RELAY_BENCH_ROWS ?? 20_000);
const ROUNDS = Number(process.env.RELAY_BENCH_ROUNDS ?? 2);
const BATCH = 500;
const NATS_URL = 'nats://127.0.0.1:4222';
/** The subject the bench rows carry (their pattern, see `insertRows()`). */
const SUBJECT = 'bench.event';

async function withStream<T>(nc: NatsConnection, run: (stream: string) => Promise<T>): Promise<T> {
  const jsm = await nc.jetstreamManager();
  const stream = uniqueName('BENCH_JS')
    .replace(/[^A-Za-z0-9_]/g, '_')
    .toUpperCase();
  await jsm.streams.add({ name: stream, subjects: [SUBJECT], duplicate_window: nanos(10 * 60_000) });
  try {
    return await run(stream);
  } finally {
    await jsm.streams.delete(stream).catch(() => undefined);
  }
}

/** ROWS messages like the relay's, 500 async publishes at a time, all PubAcks awaited; no database. */
async function rawJetStream(nc: NatsConnection, stream: string): Promise<number> {
  const js = nc.jetstream();
  const pad = 'x'.repeat(180);
  const encoder = new TextEncoder();
  const started = performance.now();
  for (let sent = 0; sent < ROWS; sent += BATCH) {
    const acks: Promise<unknown>[] = [];
    for (let n = sent + 1; n <= Math.min(ROWS, sent + BATCH); n++) {
      const data = encoder.encode(JSON.stringify({ pattern: SUBJECT, data: { n, pad } }));
      acks.push(js.publish(SUBJECT, data, { msgID: randomUUID(), expect: { streamName: stream } }));
    }
    await Promise.all(acks);
  }
  return ROWS / ((performance.now() - started) / 1000);
}

/** The hand-written relay on JetStream: each claimed batch published as `rawJetStream()` does, all PubAcks awaited. */
async function baselineRelay(nc: NatsConnection, database: string, stream: string): Promise<number> {
  const js = nc.jetstream();
  const encoder = new TextEncoder();
  return handWrittenRelay(database, async (rows) => {
    await Promise.all(
      rows.map((row) => {
        const data = encoder.encode(JSON.stringify({ pattern: row.pattern, data: JSON.parse(row.payload) }));
        return js.publish(row.pattern, data, { msgID: row.message_id, expect: { streamName: stream } });
      }),
    );
  });
}

/** The library's publisher (defaults) through `OutboxJetStreamClient`, in an app started on the filled table. */
function startJetStreamApp(database: string, stream: string) {
  @Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', ...PG, username: 'postgres', database, autoLoadEntities: true }),
      ClientsModule.register([
        // The cast: Nest 11 types `customClass` as Type<ClientProxy<…, string>>, which ClientNats's status type misses.
        {
          name: 'BROKER',
          customClass: OutboxJetStreamClient as Type<ClientProxy>,
          options: { servers: [NATS_URL], stream },
        },
      ]),
      ScheduleModule.forRoot(),
      OutboxModule.forRoot({ client: 'BROKER' }),
    ],
  })
  class JetStreamBenchModule {}
  return NestFactory.createApplicationContext(JetStreamBenchModule, { logger: ['error'] });
}

/** The table filled again with ROWS pending rows. */
async function fill(pg: Client): Promise<void> {
  await pg.query('TRUNCATE outbox_messages CASCADE');
  await insertRows(pg, ROWS);
  await pg.query('VACUUM ANALYZE outbox_messages');
}

const bench: Bench = async () => {
  const db = await createBenchDatabase();
  const raw: number[] = [];
  const baseline: number[] = [];
  const library: number[] = [];
  const nc = await connect({ servers: NATS_URL });
  try {
    const pg = await pgClient(db.name);
    try {
      for (let round = 0; round < ROUNDS; round++) {
        raw.push(await withStream(nc, (stream) => rawJetStream(nc, stream)));
        await fill(pg);
        baseline.push(await withStream(nc, (stream) => baselineRelay(nc, db.name, stream)));
        await fill(pg);
        library.push(await withStream(nc, (stream) => libraryDrain(db.name, () => startJetStreamApp(db.name, stream))));
      }
    } finally {
      await pg.end();
    }
  } finally {
    await nc.close();
    await db.drop();
  }
  const r = Math.max(...raw);
  const b = Math.max(...baseline);
  const l = Math.max(...library);
  return {
    table: [
      ...raw.map((v, i) => ({
        round: i + 1,
        publisher: 'raw nats JetStream: 500 async publishes, all PubAcks awaited, no database',
        'msg/s': Math.round(v),
      })),
      ...baseline.map((v, i) => ({
        round: i + 1,
        publisher: 'hand-written relay: claim 500, publish as raw, one UPDATE, commit',
        'msg/s': Math.round(v),
      })),
      ...library.map((v, i) => ({
        round: i + 1,
        publisher: 'nestjs-outbox publisher (defaults) + OutboxJetStreamClient',
        'msg/s': Math.round(v),
      })),
    ],
    fields: {
      rows: ROWS,
      raw_msgs_per_s: Math.round(r),
      baseline_msgs_per_s: Math.round(b),
      library_msgs_per_s: Math.round(l),
      ratio_vs_raw: Number((l / r).toFixed(3)),
      ratio: Number((l / b).toFixed(3)),
    },
  };
};

export default bench;
