import { MqttRecord, NatsRecord, RmqRecord } from '@nestjs/microservices';
import type { OutboxTransportName } from '../outbox.options';
import { ENVELOPE_FIELD, isOutboxEnvelope } from './outbox-envelope';

/** What a dry run reports of a record it would send: its header names and the size of its encoded body. */
export interface RecordDescription {
  headers: string[];
  bytes: number;
}

type Serializer = { serialize(value: unknown, options?: unknown): unknown };

/**
 * Describes the record `transport` built for `pattern` without sending it: the names of the headers it carries and
 * the size of its body as `client`'s own serializer encodes it (what its `dispatchEvent()` would put on the wire;
 * the serializer runs, so one that refuses the message fails here as it would in a publish). Never connects.
 */
export async function describeRecord(
  client: object,
  transport: OutboxTransportName,
  pattern: string,
  record: unknown,
): Promise<RecordDescription> {
  const serializer = (client as unknown as { serializer?: Serializer }).serializer;
  const packet = { pattern, data: record };
  const serialized =
    serializer === undefined
      ? packet
      : transport === 'kafka'
        ? await serializer.serialize(record, { pattern })
        : await serializer.serialize(packet);
  return { headers: headerNamesOf(client, record), bytes: bodySize(transport, serialized) };
}

function headerNamesOf(client: object, record: unknown): string[] {
  if (record instanceof RmqRecord) {
    const merge = (client as unknown as { mergeHeaders?: (h: unknown) => Record<string, unknown> | undefined })
      .mergeHeaders;
    const headers = typeof merge === 'function' ? merge.call(client, record.options?.headers) : record.options?.headers;
    return Object.keys(headers ?? {});
  }
  if (record instanceof NatsRecord) {
    const headers = record.headers as { keys?: () => string[] } | undefined;
    return typeof headers?.keys === 'function' ? [...headers.keys()] : [];
  }
  if (record instanceof MqttRecord) return Object.keys(record.options?.properties?.userProperties ?? {});
  if (isOutboxEnvelope(record)) {
    const meta = record[ENVELOPE_FIELD];
    return [`${ENVELOPE_FIELD}.id`, ...Object.keys(meta.headers ?? {}).map((h) => `${ENVELOPE_FIELD}.headers.${h}`)];
  }
  const headers = (record as { headers?: unknown } | null)?.headers;
  return typeof headers === 'object' && headers !== null ? Object.keys(headers) : [];
}

function bodySize(transport: OutboxTransportName, serialized: unknown): number {
  if (typeof serialized === 'object' && serialized !== null && !(serialized instanceof Uint8Array)) {
    const value = serialized as Record<string, unknown>;
    // RabbitMQ sends the packet without its options (they become the message's properties); NATS sends `data`
    // (already encoded); Kafka the record's `value`.
    if (transport === 'rmq' && 'options' in value) {
      const { options: _options, ...body } = value;
      return byteSize(body);
    }
    if (transport === 'nats' && 'data' in value) return byteSize(value.data);
    if (transport === 'kafka' && 'value' in value) return byteSize(value.value);
  }
  return byteSize(serialized);
}

function byteSize(value: unknown): number {
  if (value instanceof Uint8Array) return value.byteLength;
  if (typeof value === 'string') return Buffer.byteLength(value);
  if (value === undefined || value === null) return 0;
  return Buffer.byteLength(JSON.stringify(value) ?? '');
}
