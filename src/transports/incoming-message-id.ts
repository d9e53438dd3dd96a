import type { ExecutionContext } from '@nestjs/common';
import { KafkaContext, MqttContext, NatsContext, RmqContext } from '@nestjs/microservices';
import { MESSAGE_ID_HEADER } from '../outbox.constants';
import { envelopeOf } from './outbox-envelope';

/**
 * Reads the outbox message id of an incoming message: from an RPC `ExecutionContext` (as in an interceptor or
 * guard), or from the handler's `(data, context)` pair. Where it is read from:
 * - RabbitMQ (`RmqContext`): the AMQP `messageId` property, else the `x-message-id` header;
 * - NATS (`NatsContext`): the `x-message-id` message header;
 * - MQTT 5 (`MqttContext`): the `x-message-id` user property;
 * - Kafka (`KafkaContext`): the `x-message-id` record header;
 * - TCP and Redis: the outbox envelope, unwrapped by `OutboxEnvelopeDeserializer` (or still wrapped in `data`).
 * Returns `undefined` when the message carries none (it did not come from an outbox, or a TCP/Redis consumer lacks
 * `OutboxEnvelopeDeserializer`).
 */
export function getOutboxMessageId(context: ExecutionContext): string | undefined;
export function getOutboxMessageId(data: unknown, context: unknown): string | undefined;
export function getOutboxMessageId(first: unknown, second?: unknown): string | undefined {
  let data: unknown;
  let ctx: unknown;
  if (second === undefined && isExecutionContext(first)) {
    const rpc = first.switchToRpc();
    data = rpc.getData();
    ctx = rpc.getContext();
  } else {
    data = first;
    ctx = second;
  }
  return fromTransportContext(ctx) ?? envelopeOf(data)?.id;
}

function isExecutionContext(value: unknown): value is ExecutionContext {
  return (
    typeof (value as ExecutionContext)?.switchToRpc === 'function' &&
    typeof (value as ExecutionContext)?.getType === 'function'
  );
}

function text(value: unknown): string | undefined {
  if (Buffer.isBuffer(value)) value = value.toString('utf8');
  if (Array.isArray(value)) value = value[0];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

function fromTransportContext(ctx: unknown): string | undefined {
  if (ctx instanceof RmqContext) {
    const properties = (ctx.getMessage() as any)?.properties;
    return text(properties?.messageId) ?? text(properties?.headers?.[MESSAGE_ID_HEADER]);
  }
  if (ctx instanceof NatsContext) {
    const headers = ctx.getHeaders() as { get?: (name: string) => string } | undefined;
    return typeof headers?.get === 'function' ? text(headers.get(MESSAGE_ID_HEADER)) : undefined;
  }
  if (ctx instanceof MqttContext) {
    return text((ctx.getPacket() as any)?.properties?.userProperties?.[MESSAGE_ID_HEADER]);
  }
  if (ctx instanceof KafkaContext) {
    return text((ctx.getMessage() as any)?.headers?.[MESSAGE_ID_HEADER]);
  }
  return undefined;
}
