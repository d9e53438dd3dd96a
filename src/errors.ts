/**
 * Named errors. Every message says what went wrong and how to fix it.
 */

/** Base class of every error this library throws on purpose. */
export class OutboxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** An option passed to `OutboxModule.forRoot()` / `forRootAsync()` is invalid. Thrown at startup. */
export class OutboxConfigurationError extends OutboxError {}

/**
 * `emit()` (or `OutboxService.manager`) was used with no transaction to join: neither an explicit
 * `manager` nor an ambient transaction opened by `OutboxService.transaction()` / `@Idempotent()`.
 */
export class OutboxNoTransactionError extends OutboxError {}

/** `emit()` was called with arguments that cannot become an outbox row (empty pattern, bad key, …). */
export class OutboxInvalidMessageError extends OutboxError {}

/** The payload or headers given to `emit()` do not survive JSON serialization (BigInt, cycles, functions, …). */
export class OutboxSerializationError extends OutboxInvalidMessageError {}

/**
 * Throw this (or a subclass) from a publish path to mark a failure as permanent: the message is dead-lettered
 * at once instead of being retried.
 */
export class OutboxNonRetryableError extends OutboxError {}

/** A publish did not complete within `publisher.publishTimeout`. Its outcome is unknown: it is retried. */
export class OutboxPublishTimeoutError extends OutboxError {}
