/**
 * wal-message: what issue #28's `mode: 'wal-message'` would save, measured before it is built. An app's
 * transaction writes one business row and, beside it, either nothing (`business`, the baseline), one outbox row as
 * `emit()` writes it (`row`, into the table the shipped migrations make, with their indexes) or one transactional
 * logical-decoding message with the same content (`message`, `pg_logical_emit_message(true, 'nestjs-outbox', …)`,
 * no table write). CONNECTIONS connections run such transactions for SECONDS per round; the variants take turns in
 * ROUNDS rounds whose order rotates. Per variant: transactions/s (mean of the rounds), WAL bytes per transaction
 * (the cluster's `pg_current_wal_lsn()` moved, median of the rounds) and CPU of the bench database's backends per
 * transaction (/proc, median of the rounds).
 *
 * The reading side: DECODE transactions of each kind are written behind a fresh `pgoutput` slot each, and each slot
 * is peeked (`pg_logical_slot_peek_binary_changes`, proto_version 1, the outbox table's publication, messages on)
 * DECODE_ROUNDS times, the two slots in turns: decoded outbox rows or messages per second on the server (median).
 * Last, what the WAL relay then writes for a row and a message would not need: the batched mark
 * (`UPDATE … SET status = 'sent'`, 500 rows a statement, as `markStreamedSent()`), its WAL and CPU per row.
 *
 * Runs on the second cluster (`wal_level = logical`, port 5433, .ci/pg-logical.sh). The slots, the publication and
 * the database are dropped at the end, whatever happens.
 */
import 'reflect-metadata';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { v7 as uuidv7 } from 'uuid';
import { OUTBOX_MIGRATIONS } from '../src';
import { createTestDatabase } from '../test/helpers/databases';
import type { Bench } from './bench-kit';
import { median } from './bench-kit';
import { PostgresCpu } from './postgres-cpu';

const CONNECTIONS = Number(process.env.WAL_MESSAGE_BENCH_CONNECTIONS ?? 10);
const SECONDS = Number(process.env.WAL_MESSAGE_BENCH_SECONDS ?? 3);
const ROUNDS = Number(process.env.WAL_MESSAGE_BENCH_ROUNDS ?? 5);
const DECODE = Number(process.env.WAL_MESSAGE_BENCH_DECODE ?? 20_000);
const DECODE_ROUNDS = Number(process.env.WAL_MESSAGE_BENCH_DECODE_ROUNDS ?? 3);
const MARK_BATCH = 500;

type Variant = 'business' | 'row' | 'message';
const VARIANTS: Variant[] = ['business', 'row', 'message'];
const LABEL: Record<Variant, string> = {
  business: 'business only: one INSERT',
  row: 'row: + one outbox row (emit())',
  message: "wal-message: + pg_logical_emit_message(true, 'nestjs-outbox', …)",
};

const PATTERN = 'bench.event';
const PREFIX = 'nestjs-outbox';
const BUSINESS_SQL = 'INSERT INTO bench_orders (customer, amount) VALUES ($1, $2)';
/** The columns and values `SqlOutboxDialect.insertRows()` writes for one event without delay, expiry or cause. */
const NOW = '(extract(epoch from statement_timestamp()) * 1000)::bigint';
const ROW_SQL = `INSERT INTO "outbox_messages" (
    "message_id", "pattern", "payload", "headers", "ordering_key", "destination", "status", "attempts",
    "available_at", "expires_at", "created_at", "cause_scope", "cause_key"
  ) VALUES ($1, $2, $3, $4, $5, '', 'pending', 0, ${NOW}, NULL, ${NOW}, NULL, NULL)`;
const MESSAGE_SQL = `SELECT pg_logical_emit_message(true, '${PREFIX}', $1::text)`;

/** About 200 bytes of JSON, as the other benches' rows. */
function payloadOf(n: number): string {
  return JSON.stringify({ orderId: n, customer: `customer-${n % 100}`, amount: n % 1000, pad: 'x'.repeat(140) });
}

/** What the message carries instead of a row: the row's id, destination, pattern, key, headers and payload. */
function messageOf(id: string, payload: string): string {
  return `{"id":"${id}","destination":"","pattern":"${PATTERN}","key":null,"headers":null,"payload":${payload}}`;
}

async function transaction(client: Client, variant: Variant, n: number): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query(BUSINESS_SQL, [`customer-${n % 100}`, n % 1000]);
    if (variant !== 'business') {
      const id = uuidv7();
      const payload = payloadOf(n);
      if (variant === 'row') await client.query(ROW_SQL, [id, PATTERN, payload, null, null]);
      else await client.query(MESSAGE_SQL, [messageOf(id, payload)]);
    }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/** Runs `variant` on every connection until `seconds` have passed, or until `count` transactions are done. */
async function load(clients: Client[], variant: Variant, until: { seconds?: number; count?: number }): Promise<number> {
  const deadline = until.seconds !== undefined ? performance.now() + until.seconds * 1000 : Infinity;
  const count = until.count ?? Infinity;
  let started = 0;
  let done = 0;
  await Promise.all(
    clients.map(async (client) => {
      while (performance.now() < deadline && started < count) {
        const n = started++;
        await transaction(client, variant, n);
        done++;
      }
    }),
  );
  return done;
}

async function lsn(monitor: Client): Promise<string> {
  const { rows } = await monitor.query('SELECT pg_current_wal_lsn()::text AS lsn');
  return rows[0].lsn;
}

async function walSince(monitor: Client, from: string): Promise<number> {
  const { rows } = await monitor.query('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8 AS b', [from]);
  return Number(rows[0].b);
}

interface Sample {
  perS: number;
  walPerTx: number;
  cpuPerTx: number;
}

const bench: Bench = async () => {
  const loadStart = loadavg()[0];
  const db = await createTestDatabase('postgres-logical');
  const database = (db.options as { database: string }).database;
  const connect = async (name: string) => {
    const o = db.options as Record<string, any>;
    const client = new Client({ host: o.host, port: o.port, user: o.username, database: name });
    await client.connect();
    return client;
  };
  const publication = `${database}_pub`;
  const slots = { row: `${database}_row`, message: `${database}_msg` };
  const clients: Client[] = [];
  let monitor: Client | undefined;
  let reader: Client | undefined;
  let cpu: PostgresCpu | undefined;
  const samples: Record<Variant, Sample[]> = { business: [], row: [], message: [] };
  const decode: Record<'row' | 'message', Sample[]> = { row: [], message: [] };
  const decoded: Record<'row' | 'message', number> = { row: 0, message: 0 };
  let mark: Sample = { perS: NaN, walPerTx: NaN, cpuPerTx: NaN };
  let synchronousCommit = '';
  let outboxIndexes = 0;
  try {
    // The library's tables as production makes them (the shipped migrations, their indexes), and a business table.
    const ds = new DataSource({ ...db.options, migrations: [...OUTBOX_MIGRATIONS], migrationsRun: true } as any);
    await ds.initialize();
    await ds.query(
      'CREATE TABLE bench_orders (id bigserial PRIMARY KEY, customer text NOT NULL, amount integer NOT NULL, ' +
        'created_at timestamptz NOT NULL DEFAULT now())',
    );
    outboxIndexes = Number(
      (await ds.query(`SELECT count(*)::int AS n FROM pg_indexes WHERE tablename = 'outbox_messages'`))[0].n,
    );
    await ds.destroy();

    // The monitor reads the WAL position from another database, so its own backend stays out of the CPU figure.
    monitor = await connect('postgres');
    synchronousCommit = (await monitor.query('SHOW synchronous_commit')).rows[0].synchronous_commit;
    reader = await connect(database);
    for (let i = 0; i < CONNECTIONS; i++) clients.push(await connect(database));
    cpu = await PostgresCpu.open(db.options);

    const measure = async (work: () => Promise<number>): Promise<Sample> => {
      const from = await lsn(monitor!);
      const cpuBefore = await cpu?.sample();
      const t0 = performance.now();
      const count = await work();
      const seconds = (performance.now() - t0) / 1000;
      const cpuAfter = await cpu?.sample();
      const wal = await walSince(monitor!, from);
      return {
        perS: count / seconds,
        walPerTx: wal / count,
        cpuPerTx: cpuBefore && cpuAfter ? PostgresCpu.between(cpuBefore, cpuAfter) / count : NaN,
      };
    };

    for (const variant of VARIANTS) await load(clients, variant, { seconds: 1 }); // warm-up
    for (let round = 0; round < ROUNDS; round++) {
      const order = VARIANTS.map((_, i) => VARIANTS[(i + round) % VARIANTS.length]);
      for (const variant of order) {
        samples[variant].push(await measure(() => load(clients, variant, { seconds: SECONDS })));
      }
    }

    // The reading side: one slot per kind, each created just before its DECODE transactions are written, read up to
    // the end of its own writes.
    await reader.query(`CREATE PUBLICATION "${publication}" FOR TABLE "outbox_messages" WITH (publish = 'insert')`);
    const firstSeq = Number((await reader.query('SELECT coalesce(max(seq), 0) AS s FROM outbox_messages')).rows[0].s);
    await reader.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slots.row]);
    await load(clients, 'row', { count: DECODE });
    const rowEnd = await lsn(monitor);
    await reader.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slots.message]);
    await load(clients, 'message', { count: DECODE });
    const messageEnd = await lsn(monitor);
    const peek = async (kind: 'row' | 'message', upTo: string) => {
      let found = 0;
      const sample = await measure(async () => {
        // Counted on the server (I: an insert, M: a message), so the changes are decoded but not sent.
        const { rows } = await reader!.query(
          `SELECT count(*) FILTER (WHERE get_byte(data, 0) IN (73, 77))::int AS n
           FROM pg_logical_slot_peek_binary_changes($1, $2::pg_lsn, NULL,
             'proto_version', '1', 'publication_names', $3, 'messages', 'true')`,
          [slots[kind], upTo, publication],
        );
        found = rows[0].n;
        return DECODE;
      });
      decoded[kind] = found;
      decode[kind].push(sample);
    };
    for (let round = 0; round < DECODE_ROUNDS; round++) {
      if (round % 2 === 0) {
        await peek('row', rowEnd);
        await peek('message', messageEnd);
      } else {
        await peek('message', messageEnd);
        await peek('row', rowEnd);
      }
    }

    // What a row costs after it is streamed and a message would not: the WAL relay's batched mark.
    const { rows: seqRows } = await reader.query(
      `SELECT seq::text AS seq FROM outbox_messages WHERE seq > $1 ORDER BY seq LIMIT $2`,
      [firstSeq, DECODE],
    );
    const seqs = seqRows.map((r) => String(r.seq));
    mark = await measure(async () => {
      for (let i = 0; i < seqs.length; i += MARK_BATCH) {
        await reader!.query(
          `UPDATE "outbox_messages" SET "status" = 'sent', "sent_at" = (extract(epoch from clock_timestamp()) * 1000)::bigint
           WHERE "seq" IN (${seqs.slice(i, i + MARK_BATCH).join(', ')}) AND "status" = 'pending' AND "claimed_by" IS NULL`,
        );
      }
      return seqs.length;
    });
  } finally {
    const quietly = (p: Promise<unknown> | undefined) => p?.catch((e) => console.error('wal-message cleanup:', e));
    if (reader) {
      for (const slot of Object.values(slots)) {
        await quietly(
          reader.query(`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, [
            slot,
          ]),
        );
      }
      await quietly(reader.query(`DROP PUBLICATION IF EXISTS "${publication}"`));
    }
    await quietly(cpu?.close());
    for (const client of clients) await quietly(client.end());
    await quietly(reader?.end());
    await quietly(monitor?.end());
    await db.drop();
  }

  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  const tps = (v: Variant) => mean(samples[v].map((s) => s.perS));
  const wal = (s: Sample[]) => median(s.map((x) => x.walPerTx));
  const dbCpu = (s: Sample[]) => median(s.map((x) => x.cpuPerTx));
  const decodeRate = (k: 'row' | 'message') => median(decode[k].map((s) => s.perS));
  const r3 = (x: number) => Number(x.toFixed(3));
  const [business, row, message] = [tps('business'), tps('row'), tps('message')];
  const rounds = (values: number[]) => values.map((v) => Math.round(v).toLocaleString('en-US')).join(' / ');
  return {
    table: [
      ...VARIANTS.map((v) => ({
        what: LABEL[v],
        'per s': Math.round(tps(v)),
        rounds: rounds(samples[v].map((s) => s.perS)),
        'WAL B/tx': Math.round(wal(samples[v])),
        'PG CPU µs/tx': Math.round(dbCpu(samples[v])),
      })),
      ...(['row', 'message'] as const).map((k) => ({
        what: `decode ${DECODE.toLocaleString('en-US')} ${k === 'row' ? 'rows' : 'messages'} (pgoutput peek, ${decoded[k]} seen)`,
        'per s': Math.round(decodeRate(k)),
        rounds: rounds(decode[k].map((s) => s.perS)),
        'WAL B/tx': '',
        'PG CPU µs/tx': Math.round(dbCpu(decode[k])),
      })),
      {
        what: `the WAL relay's mark of a streamed row (${MARK_BATCH} a statement)`,
        'per s': Math.round(mark.perS),
        rounds: '',
        'WAL B/tx': Math.round(mark.walPerTx),
        'PG CPU µs/tx': Math.round(mark.cpuPerTx),
      },
    ],
    fields: {
      connections: CONNECTIONS,
      seconds: SECONDS,
      rounds: ROUNDS,
      synchronous_commit: synchronousCommit,
      outbox_indexes: outboxIndexes,
      payload_bytes: payloadOf(DECODE).length,
      message_bytes: messageOf(uuidv7(), payloadOf(DECODE)).length,
      business_tx_per_s: Math.round(business),
      row_tx_per_s: Math.round(row),
      message_tx_per_s: Math.round(message),
      wal_message_vs_row: r3(message / row),
      row_vs_business: r3(row / business),
      wal_message_vs_business: r3(message / business),
      wal_bytes_business: Math.round(wal(samples.business)),
      wal_bytes_row: Math.round(wal(samples.row)),
      wal_bytes_message: Math.round(wal(samples.message)),
      db_cpu_us_business: Math.round(dbCpu(samples.business)),
      db_cpu_us_row: Math.round(dbCpu(samples.row)),
      db_cpu_us_message: Math.round(dbCpu(samples.message)),
      decode_count: DECODE,
      decoded_rows_seen: decoded.row,
      decoded_messages_seen: decoded.message,
      decode_row_per_s: Math.round(decodeRate('row')),
      decode_message_per_s: Math.round(decodeRate('message')),
      decode_cpu_us_row: r3(dbCpu(decode.row)),
      decode_cpu_us_message: r3(dbCpu(decode.message)),
      wal_bytes_row_mark: Math.round(mark.walPerTx),
      mark_db_cpu_us_per_row: r3(mark.cpuPerTx),
      load_avg_start: Number(loadStart.toFixed(2)),
      load_avg_end: Number(loadavg()[0].toFixed(2)),
    },
  };
};

export default bench;
