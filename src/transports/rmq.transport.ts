import { RmqRecord } from '@nestjs/microservices';
import { MESSAGE_ID_HEADER } from '../outbox.constants';
import { cloudEventHeaders } from './cloud-event';
import type { OutboxTransport, OutgoingOutboxMessage } from './outbox-transport';

/**
 * RabbitMQ: the id is the AMQP `messageId` property and the `x-message-id` header; messages are persistent
 * (Nest's client sends transient messages by default, which a broker restart loses). CloudEvents attributes
 * travel as `ce-*` headers (AMQP 0-9-1 has no CloudEvents binding; these are the HTTP binding's names) with the
 * `content-type` header and property. A message with an expiry carries its time left as the `expiration`
 * property (ms): the broker drops (or dead-letters) it once that has passed in a queue.
 */
export class RmqOutboxTransport implements OutboxTransport {
  readonly name = 'rmq' as const;

  toRecord(message: OutgoingOutboxMessage): RmqRecord {
    const { cloudEvent } = message;
    return new RmqRecord(message.payload, {
      messageId: message.messageId,
      persistent: true,
      deliveryMode: 2,
      ...(message.expiresInMs !== undefined && { expiration: String(message.expiresInMs) }),
      ...(cloudEvent && { contentType: cloudEvent.datacontenttype }),
      headers: {
        ...message.headers,
        ...(cloudEvent && cloudEventHeaders(cloudEvent, 'ce-')),
        [MESSAGE_ID_HEADER]: message.messageId,
      },
    });
  }
}
