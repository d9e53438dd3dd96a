import type { OutboxTransportName } from '../outbox.options';
import type { CloudEventAttributes } from './cloud-event';

/** A message on its way from the outbox table to `ClientProxy.emit()`. */
export interface OutgoingOutboxMessage {
  messageId: string;
  pattern: string;
  payload: unknown;
  /** Headers given to `emit()`, without the message id. */
  headers: Record<string, string>;
  key: string | null;
  /** CloudEvents attributes to send in binary content mode (module option `cloudEvents`), named per binding. */
  cloudEvent?: CloudEventAttributes;
  /**
   * Milliseconds the message has left before it expires (at least 1), for a transport that can tell the broker
   * (RabbitMQ `expiration`, MQTT 5 message expiry interval); absent for a message without expiry.
   */
  expiresInMs?: number;
}

/**
 * How one transport carries a message: builds the `data` argument of `ClientProxy.emit(pattern, data)` so that
 * the message id (and headers) reach the consumer. Knows nothing of Nest modules or the database.
 */
export interface OutboxTransport {
  readonly name: OutboxTransportName;
  /** Loads what the transport needs (an optional peer package) before the first `toRecord()`. */
  ready?(): Promise<void>;
  /** The `data` to emit for `message`. */
  toRecord(message: OutgoingOutboxMessage): unknown;
}
