import {
  CallHandler,
  Controller,
  ExecutionContext,
  Injectable,
  NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import { Ctx, EventPattern, Payload, RmqContext } from '@nestjs/microservices';
import type { Observable } from 'rxjs';
import { getOutboxMessageId, Idempotent, OutboxService } from '../../../src';
import { FaultCounter, FaultEffect } from './entities';

/** Name of the counter the consumer increments. */
export const APPLIED_COUNTER = 'applied';

/** One delivery as the consumer's outermost interceptor saw it, before `@Idempotent()` decides anything. */
export interface ObservedDelivery {
  messageId: string | undefined;
  redelivered: boolean;
}

/**
 * Where deliveries are reported: an array in the test process, `signal()` lines in a child process. Set it before
 * the consumer starts.
 */
export const deliverySink: { report: (d: ObservedDelivery) => void } = { report: () => undefined };

/** Outermost interceptor of the consumer: sees every delivery, duplicates included. */
@Injectable()
export class DeliveryTap implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const rpc = context.switchToRpc().getContext();
    const redelivered = rpc instanceof RmqContext ? Boolean((rpc.getMessage() as any)?.fields?.redelivered) : false;
    deliverySink.report({ messageId: getOutboxMessageId(context), redelivered });
    return next.handle();
  }
}

/**
 * The consumer under test: applies each OrderPlaced with a NON-idempotent increment (`value = value + 1`) plus one
 * effect row, inside the transaction `@Idempotent()` opens for the message id. Only `@Idempotent()` stands between
 * a duplicate delivery and a double effect. RabbitMQ with `noAck: false` and `manualAck: true`: the library
 * acks after the commit (and skipped duplicates), requeues after a rollback; the handler never acks itself.
 */
@Controller()
@UseInterceptors(DeliveryTap)
export class OrderConsumer {
  constructor(private readonly outbox: OutboxService) {}

  @EventPattern('OrderPlaced')
  @Idempotent({ manualAck: true })
  async onOrderPlaced(@Payload() data: { reference: string }, @Ctx() context: RmqContext): Promise<void> {
    const manager = this.outbox.manager;
    await manager.increment(FaultCounter, { name: APPLIED_COUNTER }, 'value', 1);
    await manager.insert(FaultEffect, { source: getOutboxMessageId(data, context) ?? `no-id:${data?.reference}` });
  }
}
