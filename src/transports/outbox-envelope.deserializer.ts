import { IncomingRequestDeserializer } from '@nestjs/microservices/deserializers/incoming-request.deserializer';
import { isOutboxEnvelope, rememberEnvelope } from './outbox-envelope';

/**
 * Consumer-side deserializer for TCP and Redis microservices: unwraps the outbox envelope so `@Payload()` is the
 * payload the producer emitted, and remembers the message id for `getOutboxMessageId()` / `@Idempotent()`.
 *
 * ```ts
 * app.connectMicroservice({ transport: Transport.TCP, options: { port, deserializer: new OutboxEnvelopeDeserializer() } });
 * ```
 * Messages without an envelope pass through unchanged.
 */
export class OutboxEnvelopeDeserializer extends IncomingRequestDeserializer {
  deserialize(value: any, options?: Record<string, any>): any {
    // The base class answers synchronously; Nest 12's typings also allow a Promise (for async subclasses).
    const packet = super.deserialize(value, options) as { data?: unknown } | undefined;
    if (packet && isOutboxEnvelope(packet.data)) {
      const envelope = packet.data;
      rememberEnvelope(envelope.payload, envelope);
      return { ...packet, data: envelope.payload };
    }
    return packet;
  }
}
