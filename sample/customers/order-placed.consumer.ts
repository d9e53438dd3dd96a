import { Controller, UseInterceptors } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { Idempotent, OutboxService } from 'nestjs-outbox';
import type { OrderPlacedEvent } from '../orders/orders.service';
import { CustomerTotals } from './customer-totals.entity';
import { DeliveryLog } from './delivery-log';
import { DeliveryLogInterceptor } from './delivery-log.interceptor';

/**
 * Case 3: a consumer must apply a redelivered message once. `@Idempotent()` on a message handler records
 * (consumer, message id) in the same transaction as the handler's writes; a redelivery of that id is skipped.
 */
@Controller()
@UseInterceptors(DeliveryLogInterceptor)
export class OrderPlacedConsumer {
  constructor(
    private readonly outbox: OutboxService,
    private readonly deliveries: DeliveryLog,
  ) {}

  // manualAck: on RabbitMQ (consumer started with noAck: false) the library acknowledges the message after the
  // transaction committed, skipped duplicates too, and requeues it when the handler fails. No-op on other transports.
  // On a message handler @Idempotent() guards without an interceptor (docs/idempotency.md, "the message path").
  @EventPattern('OrderPlaced')
  @Idempotent({ manualAck: true })
  async onOrderPlaced(@Payload() event: OrderPlacedEvent, @Ctx() context: object): Promise<void> {
    const manager = this.outbox.manager; // the transaction that also holds this message's record
    await manager
      .createQueryBuilder()
      .insert()
      .into(CustomerTotals)
      .values({ id: event.customerId, orders: 0, totalSpent: 0 })
      .orIgnore()
      .execute();
    // Not idempotent: applied twice, this would count the order twice.
    await manager
      .createQueryBuilder()
      .update(CustomerTotals)
      .set({ orders: () => 'orders + 1', totalSpent: () => 'total_spent + :amount' })
      .setParameter('amount', event.amount)
      .where('id = :id', { id: event.customerId })
      .execute();
    this.deliveries.markApplied(context);
  }
}
