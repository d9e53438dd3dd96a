import type { OutboxTransportName } from '../outbox.options';
import { ENVELOPE_FIELD, OutboxEnvelope } from './outbox-envelope';
import type { OutboxTransport, OutgoingOutboxMessage } from './outbox-transport';

/**
 * TCP and Redis: Nest's packets there have no header channel, so the message travels in an envelope that
 * `OutboxEnvelopeDeserializer` unwraps on the consumer.
 */
export class EnvelopeOutboxTransport implements OutboxTransport {
  constructor(readonly name: Extract<OutboxTransportName, 'tcp' | 'redis'>) {}

  toRecord(message: OutgoingOutboxMessage): OutboxEnvelope {
    const meta: OutboxEnvelope[typeof ENVELOPE_FIELD] = { id: message.messageId };
    if (Object.keys(message.headers).length > 0) meta.headers = message.headers;
    return { [ENVELOPE_FIELD]: meta, payload: message.payload };
  }
}
