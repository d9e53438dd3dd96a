import { RmqOptions, Transport } from '@nestjs/microservices';
import { randomBytes } from 'node:crypto';
import { SERVICES } from '../../helpers/services';

export const RABBITMQ_URL = `amqp://guest:guest@${SERVICES.rabbitmq.host}:${SERVICES.rabbitmq.port}`;

/** A queue name no other test run (or developer) uses. */
export function uniqueQueue(prefix: string): string {
  return `outbox-fault-${prefix}-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
}

/** ClientsModule options that publish to `queue` (durable), optionally through a proxy's port. */
export function rmqClient(
  queue: string,
  url = RABBITMQ_URL,
): { transport: Transport.RMQ; options: RmqOptions['options'] } {
  return { transport: Transport.RMQ, options: { urls: [url], queue, queueOptions: { durable: true } } };
}

/** Microservice options of an at-least-once consumer: manual acks (`noAck: false`), durable queue. */
export function rmqServer(queue: string, prefetchCount = 100, url = RABBITMQ_URL): RmqOptions {
  return {
    transport: Transport.RMQ,
    options: { urls: [url], queue, noAck: false, prefetchCount, queueOptions: { durable: true } },
  };
}

/** Messages waiting in `queue` (ready, not unacked), or undefined when the queue does not exist. */
export async function queueDepth(queue: string): Promise<number | undefined> {
  return withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount).catch(() => undefined);
}

/** Deletes test queues from the shared RabbitMQ (best effort). */
export async function deleteQueues(...queues: string[]): Promise<void> {
  for (const q of queues) await withChannel((ch) => ch.deleteQueue(q)).catch(() => undefined);
}

async function withChannel<T>(work: (ch: import('amqplib').Channel) => Promise<T>): Promise<T> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const amqp = require('amqplib') as typeof import('amqplib');
  const connection = await amqp.connect(RABBITMQ_URL);
  try {
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    return await work(channel);
  } finally {
    await connection.close().catch(() => undefined);
  }
}
