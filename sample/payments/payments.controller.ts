import { Body, Controller, Get, HttpCode, Param, Post } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { IdempotencyKey, Idempotent, OutboxService } from 'nestjs-outbox';
import type { Repository } from 'typeorm';
import { Charge } from './charge.entity';
import { CreatePaymentDto } from './create-payment.dto';

/** Case 1: a retried payment must not charge twice. */
@Controller('payments')
export class PaymentsController {
  constructor(
    private readonly outbox: OutboxService,
    @InjectRepository(Charge) private readonly charges: Repository<Charge>,
  ) {}

  /**
   * `@Idempotent()` requires an `Idempotency-Key` header, runs this handler once per key in a transaction that
   * also records the key and the response, and answers a retry with the stored response.
   */
  @Post()
  @HttpCode(201)
  @Idempotent()
  async pay(@Body() dto: CreatePaymentDto, @IdempotencyKey() key: string) {
    // `outbox.manager` is the interceptor's transaction: the charge commits with the key, or neither does.
    // A real payment provider would get `key` too, so that its own retry protection lines up with ours.
    await this.outbox.manager.insert(Charge, { reference: dto.reference, amount: dto.amount, idempotencyKey: key });
    return { receipt: `receipt-${dto.reference}`, reference: dto.reference, amount: dto.amount };
  }

  @Get(':reference')
  async charged(@Param('reference') reference: string) {
    return { reference, charges: await this.charges.countBy({ reference }) };
  }
}
