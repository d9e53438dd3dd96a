import type { Type } from '@nestjs/common';
import { ClientOptions, ClientProxy, Transport } from '@nestjs/microservices';
import { OutboxJetStreamClient } from 'nestjs-outbox';
import { isAbsolute, join, resolve } from 'node:path';
import type { DataSourceOptions } from 'typeorm';

/**
 * Where the sample shop keeps its data and how its events travel, read from the environment:
 *
 * | Variable       | Default                                   | Examples                                              |
 * | -------------- | ----------------------------------------- | ----------------------------------------------------- |
 * | `DATABASE_URL` | `sqlite:sample/data/shop.sqlite`          | `postgres://postgres@127.0.0.1:5432/shop`, `mysql://root@127.0.0.1:3306/shop` |
 * | `BROKER_URL`   | `tcp://127.0.0.1:<PORT + 1>` (in process) | `amqp://guest:guest@127.0.0.1:5672`, `nats://127.0.0.1:4222`, `redis://127.0.0.1:6379`, `mqtt://127.0.0.1:1883` |
 * | `BROKER_QUEUE` | `sample-shop`                             | RabbitMQ queue the consumer reads                     |
 * | `NATS_STREAM`  | (none: core NATS)                         | With `BROKER_URL=nats://…`: relay to and consume from this JetStream stream (`SAMPLE_SHOP`; created when missing) |
 * | `PORT`         | `3000`                                    | HTTP port                                             |
 * | `CONSOLE_TOKEN`| `local-console-token` (local use only!)   | The operator's token for the outbox console at `/console` |
 */
export interface SampleConfig {
  /** HTTP port. */
  port: number;
  /** TypeORM options of the shop's database (without entities). */
  database: DataSourceOptions;
  /** Human-readable database, for the start-up line (no password). */
  databaseLabel: string;
  /** The broker: the same connection options serve the producer's client and the in-process consumer. */
  broker: SampleBroker;
  /**
   * The token that opens the outbox console at `/console` (basic-auth password, any user name, or the
   * `x-console-token` header). Default `DEFAULT_CONSOLE_TOKEN`, for local use only: set `CONSOLE_TOKEN` elsewhere.
   */
  consoleToken?: string;
}

/** The console token when `CONSOLE_TOKEN` is not set: known to everyone who reads this file, so local use only. */
export const DEFAULT_CONSOLE_TOKEN = 'local-console-token';

export interface SampleBroker {
  transport: Transport.TCP | Transport.RMQ | Transport.NATS | Transport.REDIS | Transport.MQTT;
  /** Options shared by `ClientsModule` and `connectMicroservice` (the consumer adds its own on top). */
  options: Record<string, unknown>;
  label: string;
  /**
   * On NATS with `NATS_STREAM`: JetStream instead of core NATS — the outbox publishes through
   * `OutboxJetStreamClient` (sent once the stream's PubAck came) and the consumer reads the durable consumer
   * `consumer` through `OutboxJetStreamServer` (acknowledged after the handler's transaction committed).
   */
  jetStream?: { stream: string; consumer: string };
}

/** A bad environment variable: says which one and what it accepts. */
export class SampleConfigError extends Error {
  name = 'SampleConfigError';
}

/** The folder the default SQLite file lives in (git-ignored; created at start). */
export const SAMPLE_DATA_DIR = join(__dirname, 'data');

export function readSampleConfig(env: NodeJS.ProcessEnv = process.env): SampleConfig {
  const port = parsePort(env.PORT ?? '3000', 'PORT');
  const { database, label: databaseLabel } = parseDatabaseUrl(
    env.DATABASE_URL ?? `sqlite:${join(SAMPLE_DATA_DIR, 'shop.sqlite')}`,
  );
  const broker = parseBrokerUrl(
    env.BROKER_URL ?? `tcp://127.0.0.1:${port + 1}`,
    env.BROKER_QUEUE ?? 'sample-shop',
    env.NATS_STREAM,
  );
  const consoleToken = env.CONSOLE_TOKEN ?? DEFAULT_CONSOLE_TOKEN;
  if (consoleToken.length < 8) throw new SampleConfigError('CONSOLE_TOKEN must be at least 8 characters long.');
  return { port, database, databaseLabel, broker, consoleToken };
}

export function parseDatabaseUrl(raw: string): { database: DataSourceOptions; label: string } {
  if (raw.startsWith('sqlite:')) {
    const path = raw.slice('sqlite:'.length).replace(/^\/\//, '');
    if (path.length === 0)
      throw new SampleConfigError('DATABASE_URL=sqlite:<path> needs a file path, e.g. sqlite:sample/data/shop.sqlite');
    const file = isAbsolute(path) ? path : resolve(path);
    return { database: { type: 'better-sqlite3', database: file }, label: `SQLite ${file}` };
  }
  const url = parseUrl(raw, 'DATABASE_URL');
  const label = `${url.protocol}//${url.host}${url.pathname}`;
  switch (url.protocol) {
    case 'postgres:':
    case 'postgresql:':
      return { database: { type: 'postgres', url: raw }, label: `PostgreSQL ${label}` };
    case 'mysql:':
    case 'mariadb:':
      return { database: { type: 'mysql', url: raw.replace(/^mariadb:/, 'mysql:') }, label: `MySQL/MariaDB ${label}` };
    default:
      throw new SampleConfigError(
        `DATABASE_URL must start with postgres://, mysql:// or sqlite:<path>; got ${url.protocol}//…`,
      );
  }
}

export function parseBrokerUrl(raw: string, queue: string, natsStream?: string): SampleBroker {
  const url = parseUrl(raw, 'BROKER_URL');
  if (natsStream !== undefined && url.protocol !== 'nats:') {
    throw new SampleConfigError(`NATS_STREAM goes with BROKER_URL=nats://…; got ${url.protocol}//…`);
  }
  const host = url.hostname || '127.0.0.1';
  switch (url.protocol) {
    case 'tcp:':
      return {
        transport: Transport.TCP,
        options: { host, port: parsePort(url.port || '3001', 'BROKER_URL port') },
        label: `TCP ${host}:${url.port || 3001} (consumer in this process)`,
      };
    case 'amqp:':
    case 'amqps:':
      return {
        transport: Transport.RMQ,
        // Durable queue: together with the persistent messages the outbox sends, a broker restart loses nothing.
        options: { urls: [raw], queue, queueOptions: { durable: true } },
        label: `RabbitMQ ${url.host}, queue ${queue}`,
      };
    case 'nats:':
      if (natsStream !== undefined) {
        if (!/^[A-Za-z0-9_-]+$/.test(natsStream)) {
          throw new SampleConfigError(
            `NATS_STREAM must be a stream name (letters, digits, _ and -); got ${natsStream}`,
          );
        }
        return {
          transport: Transport.NATS,
          options: { servers: [raw] },
          label: `NATS JetStream ${url.host}, stream ${natsStream}`,
          jetStream: { stream: natsStream, consumer: queue },
        };
      }
      return { transport: Transport.NATS, options: { servers: [raw] }, label: `NATS ${url.host}` };
    case 'redis:':
      return {
        transport: Transport.REDIS,
        options: {
          host,
          port: Number(url.port || 6379),
          ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
        },
        label: `Redis ${url.host}`,
      };
    case 'mqtt:':
      return { transport: Transport.MQTT, options: { url: raw, protocolVersion: 5 }, label: `MQTT ${url.host}` };
    default:
      throw new SampleConfigError(
        `BROKER_URL must start with tcp://, amqp://, nats://, redis:// or mqtt://; got ${url.protocol}//…`,
      );
  }
}

/** The producer's `ClientsModule` registration for `broker`. */
export function brokerClientOptions(broker: SampleBroker): ClientOptions {
  if (broker.jetStream) {
    // The cast: Nest 11 types `customClass` as Type<ClientProxy<…, string>>, which ClientNats's status type misses.
    const customClass = OutboxJetStreamClient as Type<ClientProxy>;
    return { customClass, options: { ...broker.options, stream: broker.jetStream.stream } } as ClientOptions;
  }
  return { transport: broker.transport, options: { ...broker.options } } as ClientOptions;
}

function parseUrl(raw: string, name: string): URL {
  try {
    return new URL(raw);
  } catch {
    throw new SampleConfigError(`${name} is not a URL: ${JSON.stringify(raw)}`);
  }
}

function parsePort(raw: string, name: string): number {
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new SampleConfigError(`${name} must be a port number (0–65535); got ${JSON.stringify(raw)}`);
  }
  return port;
}
