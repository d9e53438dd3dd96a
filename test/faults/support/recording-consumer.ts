import type { ConsumeMessage } from 'amqplib';
import { RABBITMQ_URL } from './rabbitmq';

export interface Delivery {
  messageId: string | undefined;
  pattern: string | undefined;
  data: any;
  redelivered: boolean;
}

/**
 * A plain amqplib consumer straight on the broker (never through a test's proxy) that acks and records every
 * delivery, for scenarios that count what arrived rather than what a handler did.
 */
export class RecordingConsumer {
  readonly deliveries: Delivery[] = [];
  private connection?: import('amqplib').ChannelModel;

  constructor(private readonly queue: string) {}

  async start(): Promise<this> {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const amqp = require('amqplib') as typeof import('amqplib');
    this.connection = await amqp.connect(RABBITMQ_URL);
    const channel = await this.connection.createChannel();
    await channel.assertQueue(this.queue, { durable: true });
    await channel.prefetch(500);
    await channel.consume(this.queue, (msg: ConsumeMessage | null) => {
      if (!msg) return;
      let body: any;
      try {
        body = JSON.parse(msg.content.toString('utf8'));
      } catch {
        body = {};
      }
      this.deliveries.push({
        messageId: msg.properties.messageId,
        pattern: body.pattern,
        data: body.data,
        redelivered: msg.fields.redelivered,
      });
      channel.ack(msg);
    });
    return this;
  }

  /** Distinct message ids received. */
  ids(): Set<string> {
    return new Set(this.deliveries.map((d) => d.messageId).filter((id): id is string => !!id));
  }

  async stop(): Promise<void> {
    await this.connection?.close().catch(() => undefined);
  }
}
