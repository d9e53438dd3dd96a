import { BaseRpcContext } from '@nestjs/microservices';

/**
 * The context argument (`@Ctx()`) of a broker consumer that the relay runs again from its inbox row, after the
 * broker's delivery failed under `@Idempotent({ retry })`: there is no broker message nor channel any more (it was
 * acknowledged when the row was stored), so this takes the place of the transport's context (`RmqContext`,
 * `NatsContext`, …). `getOutboxMessageId(data, context)` reads the message id from it; a handler that needs the
 * transport's own context checks `context instanceof RmqContext` first.
 */
export class OutboxRetryContext extends BaseRpcContext<
  [messageId: string, pattern: string, headers: Readonly<Record<string, string>>, attempts: number, dryRun?: boolean]
> {
  /** The message's id (its key: the consumer's records are keyed by it, as for the broker's deliveries). */
  getMessageId(): string {
    return this.args[0];
  }

  /** The consumer's pattern, as `@EventPattern()` declares it. */
  getPattern(): string {
    return this.args[1];
  }

  /** The headers the message arrived with (lower-case names, string values). */
  getHeaders(): Readonly<Record<string, string>> {
    return this.args[2];
  }

  /** Attempts of the message so far, this one included (the broker's first delivery was attempt 1). */
  getAttempts(): number {
    return this.args[3];
  }

  /**
   * True when this run is a dry run (`OutboxDeadLetters.dryRun()`, the console's Try): its transaction is rolled
   * back whatever happens, so a handler skips effects outside the database (an e-mail, a payment provider's call).
   */
  isDryRun(): boolean {
    return this.args[4] === true;
  }
}
