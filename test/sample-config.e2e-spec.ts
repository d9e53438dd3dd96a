import { Transport } from '@nestjs/microservices';
import { join, resolve } from 'node:path';
import { consumerOptions } from '../sample/app';
import { OutboxJetStreamClient, OutboxJetStreamServer } from '../src';
import {
  brokerClientOptions,
  parseBrokerUrl,
  parseDatabaseUrl,
  readSampleConfig,
  SAMPLE_DATA_DIR,
  SampleConfigError,
} from '../sample/config';

/** The sample's environment variables: embedded defaults, each supported URL, and errors that say what is accepted. */
describe('Sample shop configuration (DATABASE_URL, BROKER_URL, PORT)', () => {
  it('defaults to a SQLite file in sample/data, TCP on PORT + 1 and port 3000', () => {
    const config = readSampleConfig({});
    expect(config.port).toBe(3000);
    expect(config.database).toEqual({ type: 'better-sqlite3', database: join(SAMPLE_DATA_DIR, 'shop.sqlite') });
    expect(SAMPLE_DATA_DIR).toBe(resolve(__dirname, '..', 'sample', 'data'));
    expect(config.broker).toMatchObject({ transport: Transport.TCP, options: { host: '127.0.0.1', port: 3001 } });
    expect(readSampleConfig({ PORT: '4000' }).broker.options).toEqual({ host: '127.0.0.1', port: 4001 });
  });

  it.each([
    ['postgres://postgres@127.0.0.1:5432/shop', { type: 'postgres', url: 'postgres://postgres@127.0.0.1:5432/shop' }],
    ['mysql://root@127.0.0.1:3306/shop', { type: 'mysql', url: 'mysql://root@127.0.0.1:3306/shop' }],
    ['mariadb://root@127.0.0.1:3306/shop', { type: 'mysql', url: 'mysql://root@127.0.0.1:3306/shop' }],
    ['sqlite:/tmp/shop.sqlite', { type: 'better-sqlite3', database: '/tmp/shop.sqlite' }],
    ['sqlite:data/shop.sqlite', { type: 'better-sqlite3', database: resolve('data/shop.sqlite') }],
  ])('DATABASE_URL=%s', (url, expected) => {
    expect(parseDatabaseUrl(url).database).toEqual(expected);
  });

  it('never prints a database password', () => {
    expect(parseDatabaseUrl('postgres://app:secret@db:5432/shop').label).not.toContain('secret');
  });

  it.each([
    [
      'amqp://guest:guest@127.0.0.1:5672',
      Transport.RMQ,
      { urls: ['amqp://guest:guest@127.0.0.1:5672'], queue: 'q1', queueOptions: { durable: true } },
    ],
    ['nats://127.0.0.1:4222', Transport.NATS, { servers: ['nats://127.0.0.1:4222'] }],
    ['redis://127.0.0.1:6379', Transport.REDIS, { host: '127.0.0.1', port: 6379 }],
    ['mqtt://127.0.0.1:1883', Transport.MQTT, { url: 'mqtt://127.0.0.1:1883', protocolVersion: 5 }],
    ['tcp://127.0.0.1:4100', Transport.TCP, { host: '127.0.0.1', port: 4100 }],
  ])('BROKER_URL=%s', (url, transport, options) => {
    expect(parseBrokerUrl(url, 'q1')).toMatchObject({ transport, options });
  });

  it('NATS_STREAM switches NATS to JetStream: OutboxJetStreamClient publishes, OutboxJetStreamServer consumes', () => {
    const broker = readSampleConfig({ BROKER_URL: 'nats://127.0.0.1:4222', NATS_STREAM: 'SAMPLE_SHOP' }).broker;
    expect(broker).toMatchObject({
      transport: Transport.NATS,
      options: { servers: ['nats://127.0.0.1:4222'] },
      jetStream: { stream: 'SAMPLE_SHOP', consumer: 'sample-shop' },
    });
    expect(broker.label).toBe('NATS JetStream 127.0.0.1:4222, stream SAMPLE_SHOP');
    const client = brokerClientOptions(broker) as any;
    expect(client.customClass).toBe(OutboxJetStreamClient);
    expect(client.options).toEqual({ servers: ['nats://127.0.0.1:4222'], stream: 'SAMPLE_SHOP' });
    const consumer = consumerOptions(broker) as any;
    expect(consumer.strategy).toBeInstanceOf(OutboxJetStreamServer);
    // Without NATS_STREAM, NATS stays core NATS (the default).
    expect(readSampleConfig({ BROKER_URL: 'nats://127.0.0.1:4222' }).broker.jetStream).toBeUndefined();
    expect(brokerClientOptions(parseBrokerUrl('nats://127.0.0.1:4222', 'q'))).toMatchObject({
      transport: Transport.NATS,
    });
  });

  it('gives the consumer what a safe consumer needs: the envelope deserializer on TCP/Redis, manual acks on RabbitMQ', () => {
    const tcp = consumerOptions(parseBrokerUrl('tcp://127.0.0.1:4100', 'q')) as any;
    expect(tcp.options.deserializer?.constructor.name).toBe('OutboxEnvelopeDeserializer');
    const redis = consumerOptions(parseBrokerUrl('redis://127.0.0.1:6379', 'q')) as any;
    expect(redis.options.deserializer?.constructor.name).toBe('OutboxEnvelopeDeserializer');
    const rmq = consumerOptions(parseBrokerUrl('amqp://127.0.0.1', 'q')) as any;
    expect(rmq.options).toMatchObject({ noAck: false, queue: 'q', queueOptions: { durable: true } });
  });

  it.each([
    [
      { DATABASE_URL: 'mongodb://localhost/shop' },
      /DATABASE_URL must start with postgres:\/\/, mysql:\/\/ or sqlite:<path>/,
    ],
    [{ DATABASE_URL: 'not a url' }, /DATABASE_URL is not a URL/],
    [{ DATABASE_URL: 'sqlite:' }, /needs a file path/],
    [
      { BROKER_URL: 'kafka://localhost:9092' },
      /BROKER_URL must start with tcp:\/\/, amqp:\/\/, nats:\/\/, redis:\/\/ or mqtt:\/\//,
    ],
    [{ BROKER_URL: 'amqp://127.0.0.1', NATS_STREAM: 'S' }, /NATS_STREAM goes with BROKER_URL=nats:\/\//],
    [{ BROKER_URL: 'nats://127.0.0.1', NATS_STREAM: 'a.b' }, /NATS_STREAM must be a stream name/],
    [{ PORT: 'eighty' }, /PORT must be a port number/],
    [{ PORT: '70000' }, /PORT must be a port number/],
  ])('refuses %j with a SampleConfigError that says what is accepted', (env, message) => {
    expect(() => readSampleConfig(env)).toThrow(SampleConfigError);
    expect(() => readSampleConfig(env)).toThrow(message);
  });
});
