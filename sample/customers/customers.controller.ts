import { Controller, Get, Param, Query } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import type { Repository } from 'typeorm';
import { CustomerTotals } from './customer-totals.entity';
import { Delivery, DeliveryLog } from './delivery-log';

@Controller()
export class CustomersController {
  constructor(
    @InjectRepository(CustomerTotals) private readonly totals: Repository<CustomerTotals>,
    private readonly deliveries: DeliveryLog,
  ) {}

  /** A customer's totals, as the consumer has applied them (zeros before the first order arrives). */
  @Get('customers/:id')
  async customer(@Param('id') id: string) {
    const row = await this.totals.findOneBy({ id });
    return { id, orders: row?.orders ?? 0, totalSpent: row?.totalSpent ?? 0 };
  }

  /** The consumer's last deliveries (`?messageId=` filters): applied, or skipped as already applied. */
  @Get('deliveries')
  list(@Query('messageId') messageId?: string): Delivery[] {
    return this.deliveries.list(typeof messageId === 'string' ? messageId : undefined);
  }
}
