import { ClientKafka, ClientMqtt, ClientNats, ClientRedis, ClientRMQ, ClientTCP } from '@nestjs/microservices';
import { headers as natsHeaders } from 'nats';
import { EnvelopeOutboxTransport } from './envelope.transport';
import { KafkaOutboxTransport } from './kafka.transport';
import { MqttOutboxTransport } from './mqtt.transport';
import { NatsOutboxTransport } from './nats.transport';
import type { OutgoingOutboxMessage } from './outbox-transport';
import { describeRecord } from './record-description';
import { RmqOutboxTransport } from './rmq.transport';

const message: OutgoingOutboxMessage = {
  messageId: '01900000-0000-7000-8000-000000000001',
  pattern: 'OrderPlaced',
  payload: { orderId: 1, note: 'ünï' },
  headers: { tenant: 'acme' },
  key: 'order-1',
};
const json = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

/** Each transport's record as the relay builds it, described by the clients' own serializers (never connected). */
describe('describeRecord(): header names and encoded size of what a dry run would send', () => {
  it('RabbitMQ: the headers of the record (and of the client), the body without its options', async () => {
    const client = new ClientRMQ({ urls: ['amqp://127.0.0.1:1'], queue: 'q', headers: { app: 'shop' } });
    const record = new RmqOutboxTransport().toRecord(message);
    expect(await describeRecord(client, 'rmq', message.pattern, record)).toEqual({
      headers: ['app', 'tenant', 'x-message-id'],
      bytes: json({ pattern: 'OrderPlaced', data: message.payload }),
    });
  });

  it('NATS: the message headers, the encoded data', async () => {
    const client = new ClientNats({ servers: ['nats://127.0.0.1:1'] });
    const record = new NatsOutboxTransport(natsHeaders).toRecord(message);
    const described = await describeRecord(client, 'nats', message.pattern, record);
    expect(described.headers.sort()).toEqual(['tenant', 'x-message-id']);
    expect(described.bytes).toBe(json({ pattern: 'OrderPlaced', data: message.payload }));
  });

  it('MQTT: the user properties, the serialized packet', async () => {
    const client = new ClientMqtt({ url: 'mqtt://127.0.0.1:1' });
    const record = new MqttOutboxTransport().toRecord(message);
    expect(await describeRecord(client, 'mqtt', message.pattern, record)).toEqual({
      headers: ['tenant', 'x-message-id'],
      bytes: json({ pattern: 'OrderPlaced', data: message.payload }),
    });
  });

  it("Kafka: the record's headers, its encoded value", async () => {
    const client = new ClientKafka({});
    const record = new KafkaOutboxTransport().toRecord(message);
    expect(await describeRecord(client, 'kafka', message.pattern, record)).toEqual({
      headers: ['tenant', 'x-message-id'],
      bytes: json(message.payload),
    });
  });

  it('TCP and Redis: the envelope fields, the whole packet', async () => {
    for (const [client, name] of [
      [new ClientTCP({ port: 1 }), 'tcp'],
      [new ClientRedis({ port: 1 }), 'redis'],
    ] as const) {
      const record = new EnvelopeOutboxTransport(name).toRecord(message);
      expect(await describeRecord(client, name, message.pattern, record)).toEqual({
        headers: ['$outbox.id', '$outbox.headers.tenant'],
        bytes: json({ pattern: 'OrderPlaced', data: record }),
      });
    }
  });

  it('a serializer that refuses the message fails the description, as it would fail a publish', async () => {
    const client = new ClientRMQ({
      urls: ['amqp://127.0.0.1:1'],
      queue: 'q',
      serializer: {
        serialize: () => {
          throw new Error('payload too large');
        },
      },
    });
    await expect(
      describeRecord(client, 'rmq', message.pattern, new RmqOutboxTransport().toRecord(message)),
    ).rejects.toThrow('payload too large');
  });
});
