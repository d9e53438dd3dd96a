import { MqttRecord, MqttRecordBuilder } from '@nestjs/microservices';
import { MESSAGE_ID_HEADER } from '../outbox.constants';
import { cloudEventHeaders } from './cloud-event';
import type { OutboxTransport, OutgoingOutboxMessage } from './outbox-transport';

/**
 * MQTT 5: the id travels as the `x-message-id` user property (the client needs `protocolVersion: 5`; MQTT 3.1.1
 * drops user properties). Published with QoS 1, so a completed publish means the broker sent PUBACK. CloudEvents
 * attributes travel as user properties named as the attributes (`id`, `type`, …) and the content type in the
 * Content Type property, as the CloudEvents MQTT binding has it. A message with an expiry carries its time left as
 * the Message Expiry Interval (whole seconds, rounded up).
 */
export class MqttOutboxTransport implements OutboxTransport {
  readonly name = 'mqtt' as const;

  toRecord(message: OutgoingOutboxMessage): MqttRecord {
    const { cloudEvent } = message;
    const userProperties = {
      ...message.headers,
      ...(cloudEvent && cloudEventHeaders(cloudEvent, '', { contentType: false })),
      [MESSAGE_ID_HEADER]: message.messageId,
    };
    return new MqttRecordBuilder(message.payload)
      .setQoS(1)
      .setProperties({
        userProperties,
        ...(cloudEvent && { contentType: cloudEvent.datacontenttype }),
        ...(message.expiresInMs !== undefined && { messageExpiryInterval: Math.ceil(message.expiresInMs / 1000) }),
      })
      .build();
  }
}
