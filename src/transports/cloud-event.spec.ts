import { ClientTCP, KafkaContext, MqttContext, MqttRecord, NatsContext, RmqContext } from '@nestjs/microservices';
import { headers as natsHeaders } from 'nats';
import { OutboxConfigurationError } from '../errors';
import { resolveOutboxOptions } from '../outbox.options-validation';
import { isUriReference } from '../util/uri-reference';
import { cloudEventHeaders, cloudEventOf, occurredAt } from './cloud-event';
import { withCloudEvents } from './cloud-events.transport';
import { getOutboxMessageId } from './incoming-message-id';
import { KafkaOutboxTransport } from './kafka.transport';
import { MqttOutboxTransport } from './mqtt.transport';
import { NatsOutboxTransport } from './nats.transport';
import type { OutgoingOutboxMessage } from './outbox-transport';
import { resolveTransport } from './resolve-transport';
import { RmqOutboxTransport } from './rmq.transport';

// A UUIDv7 whose time is 2026-12-01T12:00:00.000Z.
const id = `${(Date.UTC(2026, 11, 1, 12) + 0)
  .toString(16)
  .padStart(12, '0')
  .replace(/^(.{8})(.{4})$/, '$1-$2')}-7abc-8def-0123456789ab`;
const message: OutgoingOutboxMessage = {
  messageId: id,
  pattern: 'OrderPlaced',
  payload: { n: 1 },
  headers: {},
  key: null,
};
const options = { source: 'urn:acme:orders' };
const attributes = {
  specversion: '1.0',
  id,
  type: 'OrderPlaced',
  source: 'urn:acme:orders',
  time: '2026-12-01T12:00:00.000Z',
};

describe('CloudEvents attributes', () => {
  it('takes id = message id, type = pattern, time from the UUIDv7 (or now for an id of the caller)', () => {
    expect(cloudEventOf(message, options)).toEqual({ ...attributes, datacontenttype: 'application/json' });
    expect(occurredAt('order-42', () => 1_000)).toEqual(new Date(1_000));
  });

  it('names headers per binding', () => {
    const ce = cloudEventOf(message, options);
    expect(cloudEventHeaders(ce, 'ce-')).toEqual({
      'ce-specversion': '1.0',
      'ce-id': id,
      'ce-type': 'OrderPlaced',
      'ce-source': 'urn:acme:orders',
      'ce-time': '2026-12-01T12:00:00.000Z',
      'content-type': 'application/json',
    });
    expect(cloudEventHeaders(ce, '', { contentType: false })).toEqual(attributes);
  });

  it('checks the source is a URI-reference', () => {
    for (const ok of ['urn:acme:orders', 'https://orders.acme.example/x?y#z', '/orders', 'orders', 'a:b/c'])
      expect(isUriReference(ok)).toBe(true);
    for (const bad of ['', ' ', 'has space', '1http://x', 'a<b', 42, undefined])
      expect(isUriReference(bad)).toBe(false);
  });

  it('is an option off by default; a bad source or an unknown key is refused by name', () => {
    expect(resolveOutboxOptions({ client: 'B' }).cloudEvents).toBe(false);
    expect(resolveOutboxOptions({ client: 'B', cloudEvents: { source: '/orders' } }).cloudEvents).toEqual({
      source: '/orders',
    });
    expect(() => resolveOutboxOptions({ client: 'B', cloudEvents: { source: 'not a uri' } })).toThrow(
      /cloudEvents\.source.*URI-reference/,
    );
    expect(() => resolveOutboxOptions({ client: 'B', cloudEvents: {} as never })).toThrow(OutboxConfigurationError);
    expect(() => resolveOutboxOptions({ client: 'B', cloudEvents: { source: '/o', typ: 'x' } as never })).toThrow(
      /typ/,
    );
  });

  it('refuses TCP and Redis, which carry no headers', () => {
    const tcp = resolveTransport('tcp', new ClientTCP({}) as never);
    expect(() => withCloudEvents(tcp, options)).toThrow(/carries headers.*'tcp'/s);
    expect(withCloudEvents(tcp, false)).toBe(tcp);
  });
});

describe('CloudEvents binary content mode per transport, and the id read back', () => {
  it('RabbitMQ: ce-* headers, content-type; a message with only ce-id is read by it', () => {
    const record = withCloudEvents(new RmqOutboxTransport(), options).toRecord(message) as any;
    expect(record.options.headers).toMatchObject({
      'ce-id': id,
      'ce-type': 'OrderPlaced',
      'ce-specversion': '1.0',
      'content-type': 'application/json',
    });
    expect(record.options.contentType).toBe('application/json');
    expect(new RmqOutboxTransport().toRecord(message).options?.headers).not.toHaveProperty('ce-id');
    const foreign = new RmqContext([{ properties: { headers: { 'ce-id': 'from-elsewhere' } } }, {}, 'OrderPlaced']);
    expect(getOutboxMessageId({}, foreign)).toBe('from-elsewhere');
  });

  it('NATS: ce-* headers; ce-id read when x-message-id is absent', () => {
    const record = withCloudEvents(new NatsOutboxTransport(natsHeaders), options).toRecord(message) as any;
    expect(record.headers.get('ce-source')).toBe('urn:acme:orders');
    expect(record.headers.get('ce-time')).toBe('2026-12-01T12:00:00.000Z');
    const foreign = natsHeaders();
    foreign.set('ce-id', 'nats-foreign');
    expect(getOutboxMessageId({}, new NatsContext(['OrderPlaced', foreign]))).toBe('nats-foreign');
  });

  it('Kafka: ce_* headers (the Kafka binding); ce_id read back', () => {
    const record = withCloudEvents(new KafkaOutboxTransport(), options).toRecord(message) as any;
    expect(record.headers).toMatchObject({ ce_id: id, ce_type: 'OrderPlaced', 'content-type': 'application/json' });
    const ctx = new KafkaContext([
      { headers: { ce_id: Buffer.from('kafka-foreign') } } as never,
      0,
      'OrderPlaced',
      undefined as never,
      undefined as never,
      undefined as never,
    ]);
    expect(getOutboxMessageId({}, ctx)).toBe('kafka-foreign');
  });

  it('MQTT 5: attributes as user properties, content type in its property; id read only beside specversion', () => {
    const record = withCloudEvents(new MqttOutboxTransport(), options).toRecord(message) as MqttRecord;
    expect(record.options?.properties?.userProperties).toMatchObject(attributes);
    expect(record.options?.properties?.contentType).toBe('application/json');
    const packet = (userProperties: Record<string, string>) =>
      new MqttContext(['OrderPlaced', { properties: { userProperties } } as never]);
    expect(getOutboxMessageId({}, packet({ specversion: '1.0', id: 'mqtt-foreign' }))).toBe('mqtt-foreign');
    expect(getOutboxMessageId({}, packet({ id: 'not-a-cloud-event' }))).toBeUndefined();
  });
});
