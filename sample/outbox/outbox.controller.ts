import { Controller, Get } from '@nestjs/common';
import { OutboxService, OutboxStats } from 'nestjs-outbox';

@Controller('outbox')
export class OutboxController {
  constructor(private readonly outbox: OutboxService) {}

  /** The outbox's state: pending, due, in flight, dead, and the age of the oldest pending event (the relay's lag). */
  @Get()
  stats(): Promise<OutboxStats> {
    return this.outbox.stats();
  }
}
