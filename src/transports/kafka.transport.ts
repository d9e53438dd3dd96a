import { MESSAGE_ID_HEADER } from '../outbox.constants';
import { cloudEventHeaders } from './cloud-event';
import type { OutboxTransport, OutgoingOutboxMessage } from './outbox-transport';

/** The record `ClientKafka.emit()` sends: kafkajs' message shape (key, value, headers). */
export interface OutboxKafkaRecord {
  key?: string;
  value: unknown;
  headers: Record<string, string>;
}

/**
 * Kafka: the id travels as the `x-message-id` record header; the ordering key becomes the record key, so a key's
 * messages land on one partition in order. A completed publish means the broker acknowledged the record (per the
 * producer's `acks`, -1 by default in kafkajs). CloudEvents attributes travel as `ce_*` headers with
 * `content-type`, as the CloudEvents Kafka binding names them.
 */
export class KafkaOutboxTransport implements OutboxTransport {
  readonly name = 'kafka' as const;

  toRecord(message: OutgoingOutboxMessage): OutboxKafkaRecord {
    const record: OutboxKafkaRecord = {
      value: message.payload,
      headers: {
        ...message.headers,
        ...(message.cloudEvent && cloudEventHeaders(message.cloudEvent, 'ce_')),
        [MESSAGE_ID_HEADER]: message.messageId,
      },
    };
    if (message.key !== null) record.key = message.key;
    return record;
  }
}
