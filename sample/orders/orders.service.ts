import { Injectable, NotFoundException, UnprocessableEntityException } from '@nestjs/common';
import { OutboxMessage, OutboxService } from 'nestjs-outbox';
import { randomUUID } from 'node:crypto';
import { Order } from './order.entity';
import type { OrderView, PlaceOrderDto } from './place-order.dto';

/** The event the consumer reacts to. */
export interface OrderPlacedEvent {
  orderId: string;
  customerId: string;
  amount: number;
}

/** Most a customer may have ordered in total, in cents. */
export const CREDIT_LIMIT = 1_000_000;

@Injectable()
export class OrdersService {
  constructor(private readonly outbox: OutboxService) {}

  /**
   * Saves the order and its `OrderPlaced` event in one transaction. Called from an `@Idempotent()` handler, the
   * transaction is the interceptor's, so the idempotency key commits with them too (`outbox.transaction()` joins
   * it; called anywhere else, it opens one).
   */
  place(dto: PlaceOrderDto): Promise<OrderView> {
    return this.outbox.transaction(async (manager) => {
      const order = manager.create(Order, {
        id: randomUUID(),
        customerId: dto.customerId,
        reference: dto.reference,
        amount: dto.amount,
      });
      // Same transaction as the order. The returned message id travels with the event; the consumer dedups by it.
      order.eventId = await this.outbox.emit('OrderPlaced', orderPlaced(order), { key: keyOf(order) });
      await manager.save(order);

      // A rule checked after the writes, in the same transaction (the total includes this order). When it fails,
      // the order and its event roll back together: no OrderPlaced is ever published for an order that is not there.
      const { total } = await manager
        .createQueryBuilder(Order, 'o')
        .select('COALESCE(SUM(o.amount), 0)', 'total')
        .where('o.customerId = :customerId', { customerId: order.customerId })
        .getRawOne();
      if (Number(total) > CREDIT_LIMIT) {
        throw new UnprocessableEntityException(
          `Order refused: customer ${order.customerId} would exceed the credit limit of ${CREDIT_LIMIT} (orders total ${total}). ` +
            'Nothing was saved and no event was written; place a smaller order.',
        );
      }
      return { id: order.id, customerId: order.customerId, reference: order.reference, amount: order.amount };
    });
  }

  /**
   * Demo only: writes the order's `OrderPlaced` into the outbox again under its original message id (replacing
   * the sent row, if still there), so the publisher sends the same message a second time — what happens when a
   * publisher crashes after the broker took a message and before the row was marked sent.
   */
  async redeliver(orderId: string): Promise<{ orderId: string; messageId: string }> {
    return this.outbox.transaction(async (manager) => {
      const order = await manager.findOneBy(Order, { id: orderId });
      if (!order?.eventId) throw new NotFoundException(`No order ${orderId}. Place one with POST /orders first.`);
      await manager.delete(OutboxMessage, { messageId: order.eventId });
      await this.outbox.emit('OrderPlaced', orderPlaced(order), { key: keyOf(order), messageId: order.eventId });
      return { orderId: order.id, messageId: order.eventId };
    });
  }
}

function orderPlaced(order: Order): OrderPlacedEvent {
  return { orderId: order.id, customerId: order.customerId, amount: order.amount };
}

/** Ordering key: one customer's events are published in commit order. */
function keyOf(order: Order): string {
  return `customer-${order.customerId}`;
}
