import { MqttRecord, MqttRecordBuilder } from '@nestjs/microservices';
import { MESSAGE_ID_HEADER } from '../outbox.constants';
import type { OutboxTransport, OutgoingOutboxMessage } from './outbox-transport';

/**
 * MQTT 5: the id travels as the `x-message-id` user property (the client needs `protocolVersion: 5`; MQTT 3.1.1
 * drops user properties). Published with QoS 1, so a completed publish means the broker sent PUBACK.
 */
export class MqttOutboxTransport implements OutboxTransport {
  readonly name = 'mqtt' as const;

  toRecord(message: OutgoingOutboxMessage): MqttRecord {
    return new MqttRecordBuilder(message.payload)
      .setQoS(1)
      .setProperties({ userProperties: { ...message.headers, [MESSAGE_ID_HEADER]: message.messageId } })
      .build();
  }
}
