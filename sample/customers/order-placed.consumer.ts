import { Controller, UseInterceptors } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { Idempotent, OutboxNonRetryableError, OutboxService } from 'nestjs-outbox';
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
  // transaction committed, skipped duplicates too. No-op on other transports.
  // On a message handler @Idempotent() guards without an interceptor (docs/idempotency.md, "the message path").
  // retry: a failure is rolled back, stored as an inbox row and acked (the queue keeps flowing); the relay runs it
  // again with backoff, and after 5 attempts it is a dead letter in the console (docs/idempotency.md, "When a
  // consumer fails").
  @EventPattern('OrderPlaced')
  @Idempotent({ manualAck: true, retry: { maxAttempts: 5, initialDelay: 1000 } })
  async onOrderPlaced(@Payload() event: OrderPlacedEvent, @Ctx() context: object): Promise<void> {
    try {
      await this.apply(event);
    } catch (error) {
      this.deliveries.markFailed(context, error);
      throw error;
    }
    this.deliveries.markApplied(context);
  }

  private async apply(event: OrderPlacedEvent): Promise<void> {
    const manager = this.outbox.manager; // the transaction that also holds this message's record
    await manager
      .createQueryBuilder()
      .insert()
      .into(CustomerTotals)
      .values({ id: event.customerId, orders: 0, totalSpent: 0 })
      .orIgnore()
      .execute();
    const customer = await manager.findOneByOrFail(CustomerTotals, { id: event.customerId });
    if (customer.onHold) {
      // No retry can help until someone acts: dead at once (not after 5 attempts), listed in the console with this
      // message; once the hold is released, a requeue applies the order once (npm run sample:demo, case 5).
      throw new OutboxNonRetryableError(
        `Customer ${event.customerId} is on hold: release it (DELETE /customers/${event.customerId}/hold), then ` +
          'requeue this message from the console.',
      );
    }
    // Not idempotent: applied twice, this would count the order twice.
    await manager
      .createQueryBuilder()
      .update(CustomerTotals)
      .set({ orders: () => 'orders + 1', totalSpent: () => 'total_spent + :amount' })
      .setParameter('amount', event.amount)
      .where('id = :id', { id: event.customerId })
      .execute();
  }
}
