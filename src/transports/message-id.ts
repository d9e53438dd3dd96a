import type { ExecutionContext } from '@nestjs/common';
import { RmqContext } from '@nestjs/microservices';
import { MESSAGE_ID_HEADER } from '../outbox.constants';
import { envelopeOf } from './outbox-envelope';

/**
 * Reads the outbox message id of an incoming message: from an RPC `ExecutionContext` (as in an interceptor or
 * guard), or from the handler's `(data, context)` pair. Returns `undefined` when the message carries none (it did
 * not come from an outbox, or a TCP/Redis consumer lacks `OutboxEnvelopeDeserializer`).
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
  return typeof (value as ExecutionContext)?.switchToRpc === 'function' && typeof (value as ExecutionContext)?.getType === 'function';
}

function fromTransportContext(ctx: unknown): string | undefined {
  if (ctx instanceof RmqContext) {
    const properties = (ctx.getMessage() as any)?.properties;
    const id = properties?.messageId ?? properties?.headers?.[MESSAGE_ID_HEADER];
    return typeof id === 'string' && id.length > 0 ? id : undefined;
  }
  return undefined;
}
