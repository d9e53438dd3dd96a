import { Controller, INestMicroservice, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, EventPattern, MicroserviceOptions, Payload, RmqContext, Transport } from '@nestjs/microservices';
import { randomBytes } from 'node:crypto';
import { getOutboxMessageId } from '../../src';
import { SERVICES } from './services';

/** What a consumer saw of one message. */
export interface ReceivedMessage {
  pattern: string;
  data: any;
  messageId: string | undefined;
  /** The transport's context object (RmqContext, NatsContext, …). */
  context: any;
}

export const RABBITMQ_URL = `amqp://guest:guest@${SERVICES.rabbitmq.host}:${SERVICES.rabbitmq.port}`;

/** A queue name no other test (or developer) uses. */
export function uniqueQueue(prefix = 'outbox-test'): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
}

/**
 * Starts a real Nest microservice that listens to `patterns` on `transport` and records every message it gets,
 * with the message id read by `getOutboxMessageId()`. RMQ messages are acked manually (noAck: false).
 */
export async function startConsumer(
  patterns: string[],
  options: MicroserviceOptions,
): Promise<{ app: INestMicroservice; received: ReceivedMessage[]; close: () => Promise<void> }> {
  const received: ReceivedMessage[] = [];
  const record = (pattern: string, data: unknown, ctx: any) => {
    received.push({ pattern, data, messageId: getOutboxMessageId(data, ctx), context: ctx });
    if (ctx instanceof RmqContext) ctx.getChannelRef().ack(ctx.getMessage());
  };
  class Sink {}
  for (const pattern of patterns) {
    const method = `on_${pattern.replace(/\W/g, '_')}`;
    (Sink.prototype as any)[method] = function (data: unknown, ctx: unknown) {
      record(pattern, data, ctx);
    };
    Payload()(Sink.prototype, method, 0);
    Ctx()(Sink.prototype, method, 1);
    const descriptor = Object.getOwnPropertyDescriptor(Sink.prototype, method)!;
    EventPattern(pattern)(Sink.prototype, method, descriptor);
  }
  Controller()(Sink);
  @Module({ controllers: [Sink] })
  class ConsumerModule {}
  const app = await NestFactory.createMicroservice<MicroserviceOptions>(ConsumerModule, {
    ...options,
    logger: false,
  } as any);
  await app.listen();
  return { app, received, close: () => app.close() };
}

/** RMQ consumer options for `queue` with manual acks. */
export function rmqConsumerOptions(queue: string, url = RABBITMQ_URL): MicroserviceOptions {
  return {
    transport: Transport.RMQ,
    options: { urls: [url], queue, noAck: false, prefetchCount: 500, queueOptions: { durable: true } },
  };
}

/** RMQ client options (for ClientsModule) that publish to `queue`. */
export function rmqClientOptions(queue: string, url = RABBITMQ_URL, extra: Record<string, unknown> = {}) {
  return {
    transport: Transport.RMQ,
    options: { urls: [url], queue, queueOptions: { durable: true }, ...extra },
  } as const;
}

/** Deletes a test queue from the shared RabbitMQ (best effort). */
export async function deleteQueue(queue: string): Promise<void> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const amqp = require('amqplib') as typeof import('amqplib');
  try {
    const connection = await amqp.connect(RABBITMQ_URL);
    try {
      const channel = await connection.createChannel();
      await channel.deleteQueue(queue);
    } finally {
      await connection.close();
    }
  } catch {
    /* best effort */
  }
}
