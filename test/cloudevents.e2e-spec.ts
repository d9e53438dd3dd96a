import { Controller, INestApplication } from '@nestjs/common';
import { EventPattern, Payload, Transport } from '@nestjs/microservices';
import type { ConsumeMessage } from 'amqplib';
import { DataSource } from 'typeorm';
import { Idempotent, OutboxConfigurationError, OutboxService } from '../src';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { deleteQueue, RABBITMQ_URL, rmqClientOptions, rmqConsumerOptions, uniqueQueue } from './helpers/consumers';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith, SERVICES } from './helpers/services';

const SOURCE = 'urn:nestjs-outbox:test:orders';
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * Checks binary-mode attributes against CloudEvents 1.0 (read by header name `prefix` + attribute): required
 * attributes present, id non-empty, source a URI-reference, specversion 1.0, time RFC 3339.
 */
function expectCloudEvent(get: (name: string) => string | undefined, prefix: string, id: string, type: string) {
  expect(get(`${prefix}specversion`)).toBe('1.0');
  expect(get(`${prefix}id`)).toBe(id);
  expect(get(`${prefix}type`)).toBe(type);
  const source = get(`${prefix}source`)!;
  expect(source).toBe(SOURCE);
  expect(source).not.toMatch(/\s/);
  const time = get(`${prefix}time`)!;
  expect(time).toMatch(RFC3339);
  expect(Number.isNaN(Date.parse(time))).toBe(false);
  expect(Math.abs(Date.parse(time) - Date.now())).toBeLessThan(10 * 60_000);
  expect(get('content-type')).toBe('application/json');
}

/** What this spec uses of the `cloudevents` SDK (typed here, so the spec compiles without the package). */
interface CloudEventsSdk {
  HTTP: {
    toEvent(message: { headers: Record<string, unknown>; body: unknown }): {
      validate(): boolean;
      data?: unknown;
    } & Record<string, unknown>;
  };
}

/**
 * The `cloudevents` SDK when it is installed (`npm i -D cloudevents@10.0.0`), else undefined: the checks above
 * validate the attributes against the spec either way.
 */
function cloudEventsSdk(): CloudEventsSdk | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require('cloudevents') as CloudEventsSdk;
  } catch {
    return undefined;
  }
}

const text = (value: unknown) => (Buffer.isBuffer(value) ? value.toString('utf8') : (value as string | undefined));

describeWith(['postgres', 'rabbitmq'], 'CloudEvents on RabbitMQ, read by a raw amqplib consumer', () => {
  const fx = useTestDatabase('postgres');
  const queue = uniqueQueue('outbox-ce');
  let app: INestApplication;
  let amqp: import('amqplib').ChannelModel;
  const received: ConsumeMessage[] = [];

  beforeAll(async () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    amqp = await (require('amqplib') as typeof import('amqplib')).connect(RABBITMQ_URL);
    const channel = await amqp.createChannel();
    await channel.assertQueue(queue, { durable: true });
    await channel.consume(queue, (msg) => msg && (received.push(msg), channel.ack(msg)));
    fx.defer(async () => {
      await amqp.close();
      await deleteQueue(queue);
    });
    app = await fx.start({
      client: rmqClientOptions(queue),
      outbox: { publisher: { pollingInterval: 50 }, cloudEvents: { source: SOURCE } },
    });
  });

  it('publishes ce-* headers that a consumer outside Nest reads as a CloudEvent', async () => {
    const outbox = app.get(OutboxService);
    const id = await outbox.transaction(() =>
      outbox.emit('OrderPlaced', { orderId: 7 }, { headers: { 'ce-subject': 'order-7' } }),
    );
    await waitFor(() => received.some((m) => m.properties.messageId === id), 'the message at the raw consumer');
    const msg = received.find((m) => m.properties.messageId === id)!;
    const headers = msg.properties.headers ?? {};
    expectCloudEvent((name) => text(headers[name]), 'ce-', id, 'OrderPlaced');
    expect(headers['ce-subject']).toBe('order-7'); // an extension attribute of the caller's passes through
    expect(msg.properties.contentType).toBe('application/json');
    // The body is Nest's packet: the CloudEvent's data is { pattern, data }.
    const body = JSON.parse(msg.content.toString('utf8'));
    expect(body).toEqual({ pattern: 'OrderPlaced', data: { orderId: 7 } });

    const sdk = cloudEventsSdk();
    if (sdk) {
      const event = sdk.HTTP.toEvent({
        headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, text(v)])),
        body: msg.content.toString('utf8'),
      });
      expect(event.validate()).toBe(true);
      expect(event).toMatchObject({ id, type: 'OrderPlaced', source: SOURCE, specversion: '1.0', subject: 'order-7' });
      expect(event.data).toEqual(body);
    }
  });
});

describeWith(['postgres', 'nats'], 'CloudEvents on NATS, read by a raw nats.js subscriber', () => {
  const fx = useTestDatabase('postgres');
  const pattern = uniqueQueue('ce.order');

  it('publishes ce-* headers', async () => {
    const nats = await import('nats');
    const connection = await nats.connect({ servers: `${SERVICES.nats.host}:${SERVICES.nats.port}` });
    fx.defer(() => connection.close());
    const subscription = connection.subscribe(pattern, { max: 1 });
    await connection.flush();
    const app = await fx.start({
      client: {
        transport: Transport.NATS,
        options: { servers: [`nats://${SERVICES.nats.host}:${SERVICES.nats.port}`] },
      } as never,
      outbox: { publisher: { pollingInterval: 50 }, cloudEvents: { source: SOURCE } },
    });
    const outbox = app.get(OutboxService);
    const id = await outbox.transaction(() => outbox.emit(pattern, { orderId: 8 }));
    for await (const msg of subscription) {
      expectCloudEvent((name) => msg.headers?.get(name) || undefined, 'ce-', id, pattern);
      expect(JSON.parse(msg.string())).toMatchObject({ pattern, data: { orderId: 8 } });
    }
  });
});

describeWith(['postgres', 'mqtt'], 'CloudEvents on MQTT 5, read by a raw mqtt.js subscriber', () => {
  const fx = useTestDatabase('postgres');
  const topic = uniqueQueue('ce-order');

  it('publishes the attributes as user properties and the content type in its property', async () => {
    const url = `mqtt://${SERVICES.mqtt.host}:${SERVICES.mqtt.port}`;
    const mqtt = await import('mqtt');
    const subscriber = await mqtt.connectAsync(url, { protocolVersion: 5 });
    fx.defer(() => subscriber.endAsync());
    const packets: import('mqtt').IPublishPacket[] = [];
    subscriber.on('message', (_topic, _payload, packet) => packets.push(packet));
    await subscriber.subscribeAsync(topic, { qos: 1 });
    const app = await fx.start({
      client: { transport: Transport.MQTT, options: { url, protocolVersion: 5 } } as never,
      outbox: { publisher: { pollingInterval: 50 }, cloudEvents: { source: SOURCE } },
    });
    const outbox = app.get(OutboxService);
    const id = await outbox.transaction(() => outbox.emit(topic, { orderId: 9 }));
    await waitFor(() => packets.length > 0, 'the MQTT message');
    const { userProperties, contentType } = packets[0].properties ?? {};
    const get = (name: string) => (name === 'content-type' ? contentType : text(userProperties?.[name]));
    expectCloudEvent(get, '', id, topic);
    expect(JSON.parse(packets[0].payload.toString())).toMatchObject({ pattern: topic, data: { orderId: 9 } });
  });
});

describe('CloudEvents on a transport without headers', () => {
  const fx = useTestDatabase('sqlite');

  it('TCP refuses to start with cloudEvents, naming the fix', async () => {
    await expect(
      fx.start({ logger: false, outbox: { transport: 'tcp', cloudEvents: { source: SOURCE } } }),
    ).rejects.toThrow(OutboxConfigurationError);
  });
});

/** Runs per CloudEvent id of the handler below. */
const runs = new Map<string, number>();

@Controller()
class ForeignOrderConsumer {
  constructor(private readonly outbox: OutboxService) {}

  @EventPattern('ForeignOrder')
  @Idempotent({ manualAck: true })
  async onOrder(@Payload() data: { ref: string }) {
    runs.set(data.ref, (runs.get(data.ref) ?? 0) + 1);
    await this.outbox.manager.query('SELECT 1');
  }
}

const kinds: DatabaseKind[] = ['postgres', 'mariadb', 'sqlite'];

for (const kind of kinds) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `@Idempotent() keys a message of a producer outside Nest by its ce-id on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let amqp: import('amqplib').ChannelModel;
      let channel: import('amqplib').Channel;
      const queue = uniqueQueue('outbox-ce-in');

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        amqp = await (require('amqplib') as typeof import('amqplib')).connect(RABBITMQ_URL);
        channel = await amqp.createChannel();
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [ForeignOrderConsumer],
          client: rmqClientOptions(queue),
          outbox: { publisher: { enabled: false } },
        });
        app = moduleRef.createNestApplication({ logger: false });
        app.connectMicroservice(rmqConsumerOptions(queue));
        await app.startAllMicroservices();
        await app.init();
      });

      afterAll(async () => {
        await app?.close();
        await amqp?.close();
        await deleteQueue(queue);
        await db?.drop();
      });

      beforeEach(() => runs.clear());

      it('runs the handler once for two deliveries with the same ce-id, and again for another ce-id', async () => {
        const ids = [`ce-${kind}-${Date.now()}-a`, `ce-${kind}-${Date.now()}-b`];
        // What another producer sends in binary mode: ce-* headers only (no messageId, no x-message-id).
        const publish = (ceId: string, ref: string) =>
          channel.sendToQueue(queue, Buffer.from(JSON.stringify({ pattern: 'ForeignOrder', data: { ref } })), {
            persistent: true,
            contentType: 'application/json',
            headers: {
              'ce-specversion': '1.0',
              'ce-id': ceId,
              'ce-type': 'ForeignOrder',
              'ce-source': '/billing',
            },
          });
        publish(ids[0], 'first');
        publish(ids[0], 'first');
        publish(ids[1], 'second');
        const ds = app.get(DataSource);
        const keys = () => ds.getRepository(IdempotencyRecord).countBy({ scope: 'ForeignOrderConsumer.onOrder' });
        await waitFor(async () => (await keys()) === 2, 'both ce-ids to be recorded');
        await waitFor(
          async () => (await channel.checkQueue(queue)).messageCount === 0,
          'the queue to be drained (the duplicate settled)',
        );
        expect(runs.get('first')).toBe(1);
        expect(runs.get('second')).toBe(1);
        const recorded = await ds.getRepository(IdempotencyRecord).findBy({ scope: 'ForeignOrderConsumer.onOrder' });
        expect(recorded.map((r) => r.key).sort()).toEqual([...ids].sort());
      });
    },
  );
}
