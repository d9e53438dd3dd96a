import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, OutboxService } from 'nestjs-outbox';
import { WelcomeEmail } from './welcome-email.entity';

/** What `POST /signups` emits once the account is saved. */
export interface UserSignedUp {
  accountId: string;
  email: string;
}

/**
 * An in-process handler, no broker involved: runs from the outbox after the sign-up committed, in its own
 * transaction with its deduplication record, so a retried or crashed run never sends the e-mail twice — and a
 * failing mail step is retried with backoff instead of failing the sign-up.
 */
@Injectable()
export class WelcomeEmails {
  constructor(private readonly outbox: OutboxService) {}

  @OnOutboxEvent('UserSignedUp')
  async send({ accountId, email }: UserSignedUp): Promise<void> {
    await this.outbox.manager.insert(WelcomeEmail, { accountId, email });
  }
}
