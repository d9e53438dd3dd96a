import { Body, Controller, HttpCode, Param, Post } from '@nestjs/common';
import { Idempotent } from 'nestjs-outbox';
import { OrdersService } from './orders.service';
import { PlaceOrderDto } from './place-order.dto';

/** Case 2: `OrderPlaced` never exists without its order, nor the order without its event. */
@Controller('orders')
export class OrdersController {
  constructor(private readonly orders: OrdersService) {}

  @Post()
  @HttpCode(201)
  @Idempotent()
  place(@Body() dto: PlaceOrderDto) {
    return this.orders.place(dto);
  }

  /**
   * Demo only: publishes this order's `OrderPlaced` again with the same message id, as a publisher that crashed
   * between publishing and marking the row sent would. The consumer must skip it.
   */
  @Post(':id/redeliver')
  @HttpCode(202)
  redeliver(@Param('id') id: string) {
    return this.orders.redeliver(id);
  }
}
