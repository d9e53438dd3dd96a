import { BadRequestException, Controller, Delete, Get, HttpCode, Param, Put, Query } from '@nestjs/common';
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

  /** Puts a customer on hold: the consumer refuses its next orders (they go dead) until the hold is released. */
  @Put('customers/:id/hold')
  @HttpCode(204)
  async hold(@Param('id') id: string): Promise<void> {
    await this.setHold(id, true);
  }

  /** Releases a customer's hold; its dead orders can then be requeued (the console, or POST /console/api/requeue). */
  @Delete('customers/:id/hold')
  @HttpCode(204)
  async release(@Param('id') id: string): Promise<void> {
    await this.setHold(id, false);
  }

  private async setHold(id: string, onHold: boolean): Promise<void> {
    if (id.length > 100) {
      throw new BadRequestException({
        type: 'about:blank',
        title: 'Invalid customer id',
        detail: `A customer id has at most 100 characters (got ${id.length}), as in POST /orders.`,
      });
    }
    // Both are idempotent by nature (PUT and DELETE set a state): no key needed.
    await this.totals
      .createQueryBuilder()
      .insert()
      .values({ id, orders: 0, totalSpent: 0, onHold })
      .orIgnore()
      .execute();
    await this.totals.update({ id }, { onHold });
  }

  /** The consumer's last deliveries (`?messageId=` filters): applied, or skipped as already applied. */
  @Get('deliveries')
  list(@Query('messageId') messageId?: string): Delivery[] {
    return this.deliveries.list(typeof messageId === 'string' ? messageId : undefined);
  }
}
