import type { ExecutionContext } from '@nestjs/common';
import {
  ClientKafka,
  ClientMqtt,
  ClientNats,
  ClientRedis,
  ClientRMQ,
  ClientTCP,
  KafkaContext,
  MqttContext,
  MqttRecord,
  NatsContext,
  NatsRecord,
  RedisContext,
  RmqContext,
  RmqRecord,
  TcpContext,
} from '@nestjs/microservices';
import { KafkaRequestSerializer } from '@nestjs/microservices/serializers/kafka-request.serializer';
import { headers as natsHeaders } from 'nats';
import { EnvelopeOutboxTransport } from './envelope.transport';
import { KafkaOutboxTransport } from './kafka.transport';
import { getOutboxMessageId } from './incoming-message-id';
import { MqttOutboxTransport } from './mqtt.transport';
import { NatsOutboxTransport } from './nats.transport';
import { OutboxEnvelopeDeserializer } from './outbox-envelope.deserializer';
import type { OutgoingOutboxMessage } from './outbox-transport';
import { detectTransport, resolveTransport } from './resolve-transport';
import { RmqOutboxTransport } from './rmq.transport';

const message: OutgoingOutboxMessage = {
  messageId: '01900000-0000-7000-8000-000000000001',
  pattern: 'OrderPlaced',
  payload: { orderId: 1 },
  headers: { tenant: 'acme' },
  key: 'order-1',
};

function rpcContext(data: unknown, ctx: unknown): ExecutionContext {
  return {
    getType: () => 'rpc',
    switchToRpc: () => ({ getData: () => data, getContext: () => ctx }),
  } as unknown as ExecutionContext;
}

describe('transports: the message id on every transport', () => {
  it('RabbitMQ: persistent record with the AMQP messageId and the x-message-id header', () => {
    const record = new RmqOutboxTransport().toRecord(message);
    expect(record).toBeInstanceOf(RmqRecord);
    expect(record.data).toEqual({ orderId: 1 });
    expect(record.options).toMatchObject({
      messageId: message.messageId,
      persistent: true,
      headers: { tenant: 'acme', 'x-message-id': message.messageId },
    });
    const ctx = new RmqContext([{ properties: { messageId: message.messageId, headers: {} } }, {}, 'OrderPlaced']);
    expect(getOutboxMessageId(record.data, ctx)).toBe(message.messageId);
    const headerOnly = new RmqContext([
      { properties: { headers: { 'x-message-id': 'from-header' } } },
      {},
      'OrderPlaced',
    ]);
    expect(getOutboxMessageId(rpcContext({}, headerOnly))).toBe('from-header');
  });

  it('NATS: x-message-id and the caller’s headers as NATS message headers', async () => {
    const transport = new NatsOutboxTransport();
    await transport.ready();
    const record = transport.toRecord(message);
    expect(record).toBeInstanceOf(NatsRecord);
    expect(record.data).toEqual({ orderId: 1 });
    expect(record.headers.get('x-message-id')).toBe(message.messageId);
    expect(record.headers.get('tenant')).toBe('acme');
    const ctx = new NatsContext(['OrderPlaced', record.headers]);
    expect(getOutboxMessageId(rpcContext(record.data, ctx))).toBe(message.messageId);
    expect(getOutboxMessageId({}, new NatsContext(['x', natsHeaders()]))).toBeUndefined();
  });

  it('MQTT 5: QoS 1 (emit completes on PUBACK) and x-message-id as a user property', () => {
    const record = new MqttOutboxTransport().toRecord(message);
    expect(record).toBeInstanceOf(MqttRecord);
    expect(record.options).toEqual({
      qos: 1,
      properties: { userProperties: { tenant: 'acme', 'x-message-id': message.messageId } },
    });
    const ctx = new MqttContext([
      'OrderPlaced',
      { properties: { userProperties: { 'x-message-id': message.messageId } } },
    ]);
    expect(getOutboxMessageId({}, ctx)).toBe(message.messageId);
  });

  it('RabbitMQ and MQTT 5: the time a message has left as the AMQP expiration (ms) / Message Expiry Interval (s)', () => {
    const expiring = { ...message, expiresInMs: 1500 };
    expect(new RmqOutboxTransport().toRecord(expiring).options).toMatchObject({ expiration: '1500' });
    expect(new RmqOutboxTransport().toRecord(message).options).not.toHaveProperty('expiration');
    expect(new MqttOutboxTransport().toRecord(expiring).options?.properties).toMatchObject({
      messageExpiryInterval: 2,
    });
    expect(new MqttOutboxTransport().toRecord(message).options?.properties).not.toHaveProperty('messageExpiryInterval');
  });

  it('Kafka: record key = ordering key, x-message-id as a record header, through ClientKafka’s serializer', () => {
    const record = new KafkaOutboxTransport().toRecord(message);
    expect(record).toEqual({
      key: 'order-1',
      value: { orderId: 1 },
      headers: { tenant: 'acme', 'x-message-id': message.messageId },
    });
    const wire = new KafkaRequestSerializer().serialize({ ...record });
    expect(wire).toEqual({
      key: 'order-1',
      value: JSON.stringify({ orderId: 1 }),
      headers: { tenant: 'acme', 'x-message-id': message.messageId },
    });
    expect(new KafkaOutboxTransport().toRecord({ ...message, key: null })).not.toHaveProperty('key');
    // kafkajs hands headers to the consumer as Buffers.
    const kafkaMessage = {
      key: Buffer.from('order-1'),
      value: Buffer.from('{}'),
      headers: { 'x-message-id': Buffer.from(message.messageId) },
    };
    const ctx = new KafkaContext([
      kafkaMessage as never,
      0,
      'OrderPlaced',
      undefined as never,
      undefined as never,
      undefined as never,
    ]);
    expect(getOutboxMessageId(rpcContext({}, ctx))).toBe(message.messageId);
  });

  it('TCP and Redis: an envelope that OutboxEnvelopeDeserializer unwraps, remembering the id', () => {
    const envelope = new EnvelopeOutboxTransport('tcp').toRecord(message);
    expect(envelope).toEqual({
      $outbox: { id: message.messageId, headers: { tenant: 'acme' } },
      payload: { orderId: 1 },
    });
    const packet = new OutboxEnvelopeDeserializer().deserialize({ pattern: 'OrderPlaced', data: envelope });
    expect(packet.data).toEqual({ orderId: 1 });
    expect(getOutboxMessageId(packet.data, new TcpContext([{} as never, 'OrderPlaced']))).toBe(message.messageId);
    expect(getOutboxMessageId(envelope, new RedisContext(['OrderPlaced']))).toBe(message.messageId);
    expect(getOutboxMessageId({ orderId: 2 }, new TcpContext([{} as never, 'OrderPlaced']))).toBeUndefined();
  });

  it('detects the transport from the client class, and names the option to set when it cannot', () => {
    expect(detectTransport(new ClientRMQ({}) as never)).toBe('rmq');
    expect(detectTransport(new ClientTCP({}) as never)).toBe('tcp');
    expect(detectTransport(new ClientRedis({}) as never)).toBe('redis');
    expect(detectTransport(new ClientNats({}) as never)).toBe('nats');
    expect(detectTransport(new ClientMqtt({}) as never)).toBe('mqtt');
    expect(detectTransport(new ClientKafka({}) as never)).toBe('kafka');
    expect(resolveTransport('auto', new ClientKafka({}) as never).name).toBe('kafka');
    expect(() => resolveTransport('auto', { emit: () => undefined } as never)).toThrow(/Set the `transport` option/);
  });
});
