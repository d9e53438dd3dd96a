import { NatsRecord, NatsRecordBuilder } from '@nestjs/microservices';
import { MESSAGE_ID_HEADER } from '../outbox.constants';
import { cloudEventHeaders } from './cloud-event';
import type { OutboxTransport, OutgoingOutboxMessage } from './outbox-transport';

type NatsHeaders = { set(name: string, value: string): void };

/**
 * NATS: the id travels as the `x-message-id` message header (NATS 2.2+ headers), beside the caller's headers.
 * Core NATS publishes are fire-and-forget: a completed publish only proves the bytes left the process.
 * CloudEvents attributes travel as `ce-*` headers with `content-type` (the HTTP binding's names).
 */
export class NatsOutboxTransport implements OutboxTransport {
  readonly name = 'nats' as const;

  constructor(private createHeaders?: () => NatsHeaders) {}

  /** Loads the `nats` package (the app's dependency, an optional peer here) for its header factory. */
  async ready(): Promise<void> {
    if (this.createHeaders) return;
    const nats = (await import('nats')) as unknown as {
      headers?: () => NatsHeaders;
      default?: { headers: () => NatsHeaders };
    };
    this.createHeaders = nats.headers ?? nats.default!.headers;
  }

  toRecord(message: OutgoingOutboxMessage): NatsRecord {
    if (!this.createHeaders) throw new Error('NatsOutboxTransport.ready() must resolve before toRecord()');
    const headers = this.createHeaders();
    for (const [name, value] of Object.entries(message.headers)) headers.set(name, value);
    if (message.cloudEvent) {
      for (const [name, value] of Object.entries(cloudEventHeaders(message.cloudEvent, 'ce-')))
        headers.set(name, value);
    }
    headers.set(MESSAGE_ID_HEADER, message.messageId);
    return new NatsRecordBuilder(message.payload).setHeaders(headers).build();
  }
}
