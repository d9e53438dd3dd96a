import { Body, ConflictException, Controller, HttpCode, Post } from '@nestjs/common';
import { Idempotent, OutboxService } from 'nestjs-outbox';
import { isUniqueViolation } from '../http/unique-violation';
import { Account } from './account.entity';
import { SignupDto } from './signup.dto';
import type { UserSignedUp } from './welcome-emails';

/** Case 4: a mobile client retrying a flaky sign-up must not get two accounts. */
@Controller('signups')
export class SignupsController {
  constructor(private readonly outbox: OutboxService) {}

  /** A retry with the same key gets the same account back (the stored response); the handler runs once. */
  @Post()
  @HttpCode(201)
  @Idempotent()
  async signUp(@Body() dto: SignupDto) {
    const { email } = dto;
    const manager = this.outbox.manager;
    // A different key for an email that already has an account is a new request, and a conflict.
    const conflict = () =>
      new ConflictException(
        `An account for ${email} already exists. Sign in instead, or retry with the Idempotency-Key of the sign-up that created it.`,
      );
    if (await manager.existsBy(Account, { email })) throw conflict();
    try {
      const account = await manager.save(manager.create(Account, { email }));
      // Committed with the account; WelcomeEmails (an in-process @OnOutboxEvent handler) records the e-mail after.
      const event: UserSignedUp = { accountId: account.id, email: account.email };
      await this.outbox.emit('UserSignedUp', event, { key: account.id });
      return { id: account.id, email: account.email };
    } catch (error) {
      if (isUniqueViolation(error)) throw conflict();
      throw error;
    }
  }
}
