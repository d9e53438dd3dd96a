/**
 * emit-many: writing 10,000 events in one transaction, three ways, on PostgreSQL, MariaDB and SQLite, in
 * interleaved rounds: `emitMany()`; a loop of awaited `emit()`s (the baseline an app has without `emitMany()`);
 * and a hand-written multi-row INSERT of the same columns through the same connection, 1,000 rows a statement
 * (the floor: what the library's validation, serialization and chunking cost on top of the SQL).
 */
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ClientsModule, Transport } from '@nestjs/microservices';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { DataSource, DataSourceOptions, EntityManager } from 'typeorm';
import { v7 as uuidv7 } from 'uuid';
import { OutboxMessage, OutboxModule, OutboxService } from '../src';
import { median, type Bench } from './bench-kit';
import { PG, uniqueName } from './relay-support';

const EVENTS = 10_000;
const ROUNDS = 3;
const HAND_CHUNK = 1_000;

type Kind = 'postgres' | 'mariadb' | 'sqlite';
const MARIADB = { host: '127.0.0.1', port: 3306, username: 'root', password: '' };

/** A scratch database of `kind`: its TypeORM options and how to drop it. */
async function scratch(kind: Kind): Promise<{ options: DataSourceOptions; drop: () => Promise<void> }> {
  if (kind === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'outbox-bench-'));
    return {
      options: { type: 'better-sqlite3', database: join(dir, 'bench.sqlite') },
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const name = uniqueName('outbox_bench');
  const server: DataSourceOptions =
    kind === 'postgres'
      ? { type: 'postgres', ...PG, username: 'postgres', database: 'postgres' }
      : { type: 'mysql', ...MARIADB };
  const admin = await new DataSource(server).initialize();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.destroy();
  return {
    options: { ...server, database: name } as DataSourceOptions,
    drop: async () => {
      const a = await new DataSource(server).initialize();
      await a.query(`DROP DATABASE IF EXISTS ${name}${kind === 'postgres' ? ' WITH (FORCE)' : ''}`);
      await a.destroy();
    },
  };
}

async function startApp(options: DataSourceOptions) {
  @Module({
    imports: [
      TypeOrmModule.forRoot({ ...options, autoLoadEntities: true, synchronize: true, logging: false } as never),
      ClientsModule.register([{ name: 'BROKER', transport: Transport.TCP, options: { port: 1 } }]),
      ScheduleModule.forRoot(),
      OutboxModule.forRoot({ client: 'BROKER', publisher: { enabled: false } }),
    ],
  })
  class EmitManyBenchModule {}
  return NestFactory.createApplicationContext(EmitManyBenchModule, { logger: ['error'] });
}

const events = () =>
  Array.from({ length: EVENTS }, (_, n) => ({ pattern: 'bench.event', payload: { n, pad: 'x'.repeat(180) } }));

/** The same INSERT the library sends, written by hand: placeholders for the row's text, the database clock. */
async function handInsert(manager: EntityManager, kind: Kind): Promise<void> {
  const q = (c: string) => (kind === 'mariadb' ? `\`${c}\`` : `"${c}"`);
  const now =
    kind === 'postgres'
      ? `(extract(epoch from clock_timestamp()) * 1000)::bigint`
      : kind === 'mariadb'
        ? `(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)`
        : `CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)`;
  const all = events();
  for (let start = 0; start < all.length; start += HAND_CHUNK) {
    const params: unknown[] = [];
    const values = all.slice(start, start + HAND_CHUNK).map((e) => {
      params.push(uuidv7(), e.pattern, JSON.stringify(e.payload));
      const p = (i: number) => (kind === 'postgres' ? `$${params.length - 2 + i}` : '?');
      return `(${p(0)}, ${p(1)}, ${p(2)}, NULL, NULL, 'pending', 0, ${now}, ${now})`;
    });
    await manager.query(
      `INSERT INTO ${q('outbox_messages')} (${['message_id', 'pattern', 'payload', 'headers', 'ordering_key', 'status', 'attempts', 'available_at', 'created_at'].map(q).join(', ')}) VALUES ${values.join(', ')}`,
      params,
    );
  }
}

async function measure(kind: Kind): Promise<Record<string, number>> {
  const db = await scratch(kind);
  const app = await startApp(db.options);
  try {
    const outbox = app.get(OutboxService);
    const ds = app.get(DataSource);
    const variants: Record<string, () => Promise<unknown>> = {
      'emit() loop': () =>
        outbox.transaction(async () => {
          for (const e of events()) await outbox.emit(e.pattern, e.payload);
        }),
      emitMany: () => outbox.transaction(() => outbox.emitMany(events())),
      'hand-written INSERT': () => ds.transaction((manager) => handInsert(manager, kind)),
    };
    const times: Record<string, number[]> = {};
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, run] of Object.entries(variants)) {
        await ds.createQueryBuilder().delete().from(OutboxMessage).execute();
        const started = performance.now();
        await run();
        (times[name] ??= []).push(performance.now() - started);
        const count = await ds.getRepository(OutboxMessage).count();
        if (count !== EVENTS) throw new Error(`emit-many: ${name} wrote ${count} rows, not ${EVENTS}`);
      }
    }
    return Object.fromEntries(Object.entries(times).map(([name, t]) => [name, EVENTS / (median(t) / 1000)]));
  } finally {
    await app.close();
    await db.drop();
  }
}

const bench: Bench = async () => {
  const table: Array<Record<string, string | number>> = [];
  const fields: Record<string, number | string | boolean> = { events: EVENTS, rounds: ROUNDS };
  for (const kind of ['postgres', 'mariadb', 'sqlite'] as const) {
    const rates = await measure(kind);
    const many = rates.emitMany;
    table.push({
      database: kind,
      'emit() loop ev/s': Math.round(rates['emit() loop']),
      'emitMany ev/s': Math.round(many),
      'hand INSERT ev/s': Math.round(rates['hand-written INSERT']),
      'emitMany / loop': many / rates['emit() loop'],
      'emitMany / hand': many / rates['hand-written INSERT'],
    });
    fields[`${kind}_loop_per_s`] = Math.round(rates['emit() loop']);
    fields[`${kind}_many_per_s`] = Math.round(many);
    fields[`${kind}_hand_per_s`] = Math.round(rates['hand-written INSERT']);
    fields[`${kind}_many_vs_loop`] = Number((many / rates['emit() loop']).toFixed(2));
    fields[`${kind}_many_vs_hand`] = Number((many / rates['hand-written INSERT']).toFixed(2));
  }
  return { table, fields };
};

export default bench;
