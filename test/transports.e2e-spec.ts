import { MicroserviceOptions, Transport } from '@nestjs/microservices';
import { randomBytes } from 'node:crypto';
import { OutboxEnvelopeDeserializer } from '../src';
import {
  deleteQueue,
  RABBITMQ_URL,
  rmqClientOptions,
  rmqConsumerOptions,
  startConsumer,
  uniqueQueue,
} from './helpers/consumers';
import { DATABASE_LABEL } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { freePort, waitFor } from './helpers/ports';
import { describeWith, ServiceName, SERVICES } from './helpers/services';

interface TransportCase {
  name: string;
  services: ServiceName[];
  /** Consumer and client options; `pattern` is unique per run (the brokers are shared). */
  setup(): Promise<{ consumer: MicroserviceOptions; client: Record<string, unknown>; cleanup?: () => Promise<void> }>;
  /** Reads a header the producer set, from the consumer's context (where the transport has headers). */
  header?(context: any, name: string): string | undefined;
  /** The time left (seconds) the broker received with a message, from the consumer's context (where it carries it). */
  expiry?(context: any): number | undefined;
}

const cases: TransportCase[] = [
  {
    name: 'RabbitMQ (RMQ)',
    services: ['rabbitmq'],
    setup: async () => {
      const queue = uniqueQueue('outbox-transports');
      return {
        consumer: rmqConsumerOptions(queue),
        client: rmqClientOptions(queue, RABBITMQ_URL),
        cleanup: () => deleteQueue(queue),
      };
    },
    header: (ctx, name) => ctx.getMessage().properties.headers[name],
  },
  {
    name: 'NATS',
    services: ['nats'],
    setup: async () => {
      const servers = [`nats://${SERVICES.nats.host}:${SERVICES.nats.port}`];
      return {
        consumer: { transport: Transport.NATS, options: { servers } },
        client: { transport: Transport.NATS, options: { servers } },
      };
    },
    header: (ctx, name) => ctx.getHeaders()?.get(name),
  },
  {
    name: 'MQTT 5 (QoS 1)',
    services: ['mqtt'],
    setup: async () => {
      const url = `mqtt://${SERVICES.mqtt.host}:${SERVICES.mqtt.port}`;
      return {
        consumer: { transport: Transport.MQTT, options: { url, protocolVersion: 5, subscribeOptions: { qos: 1 } } },
        client: { transport: Transport.MQTT, options: { url, protocolVersion: 5 } },
      };
    },
    header: (ctx, name) => ctx.getPacket().properties?.userProperties?.[name],
    expiry: (ctx) => ctx.getPacket().properties?.messageExpiryInterval,
  },
  {
    name: 'Redis',
    services: ['redis'],
    setup: async () => {
      const { host, port } = SERVICES.redis;
      return {
        consumer: {
          transport: Transport.REDIS,
          options: { host, port, deserializer: new OutboxEnvelopeDeserializer() },
        },
        client: { transport: Transport.REDIS, options: { host, port } },
      };
    },
  },
  {
    name: 'TCP',
    services: [],
    setup: async () => {
      const port = await freePort();
      return {
        consumer: {
          transport: Transport.TCP,
          options: { host: '127.0.0.1', port, deserializer: new OutboxEnvelopeDeserializer() },
        },
        client: { transport: Transport.TCP, options: { host: '127.0.0.1', port } },
      };
    },
  },
];

for (const transport of cases) {
  describeWith(
    transport.services,
    `Message id round trip over ${transport.name} (outbox on ${DATABASE_LABEL.sqlite})`,
    () => {
      let consumer: Awaited<ReturnType<typeof startConsumer>>;
      const pattern = `outbox.test.${randomBytes(4).toString('hex')}`;
      const fx = useOutboxApp('sqlite', async ({ defer }) => {
        const setup = await transport.setup();
        if (setup.cleanup) defer(setup.cleanup);
        consumer = await startConsumer([pattern], setup.consumer);
        defer(() => consumer.close());
        return { client: setup.client as never, logger: false };
      });

      it('the consumer gets the payload and reads the message id with getOutboxMessageId()', async () => {
        const { outbox } = fx;
        const id = await outbox.transaction(() =>
          outbox.emit(pattern, { orderId: 9, total: 12.5 }, { headers: { tenant: 'acme' } }),
        );
        await waitFor(() => consumer.received.length >= 1, `the ${transport.name} consumer to receive the message`);
        const [message] = consumer.received;
        expect(message.pattern).toBe(pattern);
        expect(message.data).toEqual({ orderId: 9, total: 12.5 });
        expect(message.messageId).toBe(id);
        if (transport.header) {
          expect(transport.header(message.context, 'x-message-id')).toBe(id);
          expect(transport.header(message.context, 'tenant')).toBe('acme');
        }
      });

      if (transport.expiry) {
        const expiryOf = transport.expiry;
        it('a message emitted with an expiry carries the time left; one without carries none', async () => {
          const { outbox } = fx;
          const before = consumer.received.length;
          const [timed, plain] = await outbox.transaction(async () => [
            await outbox.emit(pattern, { n: 1 }, { expiresIn: 60_000 }),
            await outbox.emit(pattern, { n: 2 }),
          ]);
          await waitFor(() => consumer.received.length >= before + 2, `both messages over ${transport.name}`);
          const received = (id: string) => consumer.received.find((m) => m.messageId === id)!;
          const left = expiryOf(received(timed).context);
          expect(Number.isInteger(left)).toBe(true);
          expect(left).toBeGreaterThan(0);
          expect(left).toBeLessThanOrEqual(60);
          expect(expiryOf(received(plain).context)).toBeUndefined();
        });
      }
    },
  );
}
