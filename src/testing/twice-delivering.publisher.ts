import { Injectable } from '@nestjs/common';
import type { ClientProxy } from '@nestjs/microservices';
import type { ClaimedOutboxRow } from '../dialects/outbox-dialect';
import { OutboxPublisher } from '../publisher/outbox-publisher';

/**
 * An `OutboxPublisher` that sends every message twice, with the same message id, the second right after the broker
 * confirmed the first: what an at-least-once broker does to a consumer after a lost ack or a publisher retry.
 * For tests only (see `deliverEveryMessageTwice()`): a consumer that applies the duplicate is not idempotent.
 */
@Injectable()
export class TwiceDeliveringOutboxPublisher extends OutboxPublisher {
  protected override async publish(client: ClientProxy, row: ClaimedOutboxRow): Promise<void> {
    await super.publish(client, row);
    await super.publish(client, row);
  }
}
