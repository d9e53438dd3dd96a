import { RmqRecord } from '@nestjs/microservices';
import { MESSAGE_ID_HEADER } from '../outbox.constants';
import type { OutboxTransport, OutgoingOutboxMessage } from './outbox-transport';

/**
 * RabbitMQ: the id is the AMQP `messageId` property and the `x-message-id` header; messages are persistent
 * (Nest's client sends transient messages by default, which a broker restart loses).
 */
export class RmqOutboxTransport implements OutboxTransport {
  readonly name = 'rmq' as const;

  toRecord(message: OutgoingOutboxMessage): RmqRecord {
    return new RmqRecord(message.payload, {
      messageId: message.messageId,
      persistent: true,
      deliveryMode: 2,
      headers: { ...message.headers, [MESSAGE_ID_HEADER]: message.messageId },
    });
  }
}
