/**
 * Shared pieces of the relay, latency and claim-scale benchmarks: a scratch PostgreSQL database with the outbox
 * table, bulk row generation, and a Nest app that runs the library's publisher with default settings.
 */
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ClientsModule, Transport } from '@nestjs/microservices';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { OutboxMessage, OutboxModule, OutboxModuleOptions } from '../src';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { IdempotencyStep } from '../src/schema/idempotency-step.entity';
import { OutboxAttempt } from '../src/schema/outbox-attempt.entity';
import { OutboxKeyLock } from '../src/schema/outbox-key-lock.entity';

export const PG = { host: '127.0.0.1', port: 5432, user: 'postgres' };
/** The second cluster, with `wal_level = logical` (.ci/pg-logical.sh), for the WAL relay. */
export const PG_LOGICAL = { ...PG, port: 5433 };
export const AMQP_URL = 'amqp://guest:guest@127.0.0.1:5672';

export function uniqueName(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
}

/** A fresh PostgreSQL database with the library's four tables (created by TypeORM), as the startup check needs. */
export async function createBenchDatabase(pg = PG): Promise<{ name: string; drop: () => Promise<void> }> {
  const name = uniqueName('outbox_bench');
  const admin = new Client({ ...pg, database: 'postgres' });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const entities = [OutboxMessage, OutboxKeyLock, OutboxAttempt, IdempotencyRecord, IdempotencyStep];
  const ds = new DataSource({
    type: 'postgres',
    ...pg,
    username: 'postgres',
    database: name,
    entities,
    synchronize: true,
  });
  await ds.initialize();
  await ds.destroy();
  return {
    name,
    drop: async () => {
      const a = new Client({ ...pg, database: 'postgres' });
      await a.connect();
      await a.query(`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1`, [name]);
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.end();
    },
  };
}

/**
 * Inserts `count` rows of about 200 bytes of payload in one statement, with `status` (pending, sent or dead).
 * Message ids are random UUIDs, or time-ordered ones (`ordered`, as the library's UUIDv7 ids are).
 */
export async function insertRows(
  client: Client,
  count: number,
  status: 'pending' | 'sent' | 'dead' = 'pending',
  key: string | null = null,
  ids: 'random' | 'ordered' = 'random',
): Promise<void> {
  const id =
    ids === 'random'
      ? 'gen_random_uuid()::text'
      : `lpad(to_hex((extract(epoch from clock_timestamp()) * 1000)::bigint), 12, '0') || '-' || lpad(g::text, 12, '0')`;
  await client.query(
    `INSERT INTO outbox_messages (message_id, pattern, payload, headers, ordering_key, status, attempts, available_at, created_at, sent_at)
     SELECT ${id}, 'bench.event', '{"n":' || g || ',"pad":"' || repeat('x', 180) || '"}', NULL, $2, $3, ${status === 'pending' ? 0 : 1},
            (extract(epoch from now()) * 1000)::bigint, (extract(epoch from now()) * 1000)::bigint,
            ${status === 'sent' ? '(extract(epoch from now()) * 1000)::bigint' : 'NULL'}
     FROM generate_series(1, $1::int) g`,
    [count, key, status],
  );
}

export async function pgClient(database: string, pg = PG): Promise<Client> {
  const client = new Client({ ...pg, database });
  await client.connect();
  return client;
}

/** Starts a Nest application context with TypeORM on `database`, an RMQ client to `queue` and the outbox. */
export async function startOutboxApp(
  database: string,
  queue: string,
  outbox: Omit<OutboxModuleOptions, 'client'> = {},
  pg = PG,
) {
  @Module({
    imports: [
      TypeOrmModule.forRoot({
        type: 'postgres',
        ...pg,
        username: 'postgres',
        database,
        autoLoadEntities: true,
        synchronize: false,
      }),
      ClientsModule.register([
        {
          name: 'BROKER',
          transport: Transport.RMQ,
          options: { urls: [AMQP_URL], queue, queueOptions: { durable: true } },
        },
      ]),
      ScheduleModule.forRoot(),
      OutboxModule.forRoot({ client: 'BROKER', ...outbox }),
    ],
  })
  class BenchAppModule {}
  const app = await NestFactory.createApplicationContext(BenchAppModule, { logger: ['error'] });
  app.enableShutdownHooks();
  return app;
}

/** Deletes a queue (best effort). */
export async function deleteQueue(queue: string): Promise<void> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const amqp = require('amqplib') as typeof import('amqplib');
  const connection = await amqp.connect(AMQP_URL);
  try {
    const channel = await connection.createChannel();
    await channel.deleteQueue(queue);
  } catch {
    /* best effort */
  } finally {
    await connection.close().catch(() => undefined);
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
