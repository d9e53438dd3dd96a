import type { ExecutionContext } from '@nestjs/common';
import { KafkaContext, MqttContext, NatsContext, RmqContext } from '@nestjs/microservices';
import { MESSAGE_ID_HEADER } from '../outbox.constants';
import { envelopeOf } from './outbox-envelope';
import { OutboxRetryContext } from './outbox-retry.context';

/**
 * Reads the outbox message id of an incoming message: from an RPC `ExecutionContext` (as in an interceptor or
 * guard), or from the handler's `(data, context)` pair. Where it is read from:
 * - RabbitMQ (`RmqContext`): the AMQP `messageId` property, else the `x-message-id` header;
 * - NATS (`NatsContext`): the `x-message-id` message header;
 * - MQTT 5 (`MqttContext`): the `x-message-id` user property;
 * - Kafka (`KafkaContext`): the `x-message-id` record header;
 * - TCP and Redis: the outbox envelope, unwrapped by `OutboxEnvelopeDeserializer` (or still wrapped in `data`).
 * Without the library's own id, a CloudEvents id is read (binary content mode, as a producer outside Nest sends it):
 * the `ce-id` header (RabbitMQ, NATS), the `ce_id` header (Kafka), the `id` user property beside `specversion`
 * (MQTT 5).
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

/** The CloudEvents id in binary content mode: HTTP-style header name (RabbitMQ, NATS) and the Kafka binding's. */
const CE_ID = 'ce-id';
const CE_ID_KAFKA = 'ce_id';

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
  if (ctx instanceof OutboxRetryContext) return ctx.getMessageId();
  if (ctx instanceof RmqContext) {
    const properties = (ctx.getMessage() as any)?.properties;
    const headers = properties?.headers;
    return text(properties?.messageId) ?? text(headers?.[MESSAGE_ID_HEADER]) ?? text(headers?.[CE_ID]);
  }
  if (ctx instanceof NatsContext) {
    const headers = ctx.getHeaders() as { get?: (name: string) => string } | undefined;
    return typeof headers?.get === 'function'
      ? (text(headers.get(MESSAGE_ID_HEADER)) ?? text(headers.get(CE_ID)))
      : undefined;
  }
  if (ctx instanceof MqttContext) {
    const properties = (ctx.getPacket() as any)?.properties?.userProperties;
    return text(properties?.[MESSAGE_ID_HEADER]) ?? (text(properties?.specversion) && text(properties?.id));
  }
  if (ctx instanceof KafkaContext) {
    const headers = (ctx.getMessage() as any)?.headers;
    return text(headers?.[MESSAGE_ID_HEADER]) ?? text(headers?.[CE_ID_KAFKA]);
  }
  return undefined;
}
