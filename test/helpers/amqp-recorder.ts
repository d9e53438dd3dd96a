import type { Channel, ChannelModel } from 'amqplib';
import { RABBITMQ_URL } from './consumers';

/** One message as a raw AMQP consumer saw it. */
export interface RecordedMessage {
  messageId: string;
  pattern: string;
  data: any;
  /** The AMQP `expiration` property (ms, as a string), when the message has one. */
  expiration?: string;
}

/**
 * A plain amqplib consumer (manual acks) that records every message of a queue in arrival order — fast enough for
 * suites that move ten thousand messages.
 */
export class AmqpRecorder {
  readonly messages: RecordedMessage[] = [];
  private connection?: ChannelModel;
  private channel?: Channel;

  constructor(readonly queue: string) {}

  async start(): Promise<this> {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const amqp = require('amqplib') as typeof import('amqplib');
    this.connection = await amqp.connect(RABBITMQ_URL);
    const channel = await this.connection.createChannel();
    this.channel = channel;
    await channel.assertQueue(this.queue, { durable: true });
    await channel.prefetch(1000);
    await channel.consume(this.queue, (msg) => {
      if (!msg) return;
      const body = JSON.parse(msg.content.toString('utf8'));
      const { messageId, expiration } = msg.properties;
      this.messages.push({ messageId, pattern: body.pattern, data: body.data, ...(expiration && { expiration }) });
      channel.ack(msg);
    });
    return this;
  }

  /** Distinct message ids received. */
  distinct(): Set<string> {
    return new Set(this.messages.map((m) => m.messageId));
  }

  async stop(deleteQueue = true): Promise<void> {
    if (deleteQueue) await this.channel?.deleteQueue(this.queue).catch(() => undefined);
    await this.connection?.close().catch(() => undefined);
  }
}
