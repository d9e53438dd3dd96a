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

/** A table the startup schema check found missing, or lacking columns the library reads or writes. */
export interface OutboxSchemaProblem {
  /** The table as the library addresses it (schema-qualified when the entity or the DataSource sets a schema). */
  table: string;
  /** True when the table does not exist at all. */
  tableMissing: boolean;
  /** The needed columns the table lacks (all of them when the table is missing). */
  missingColumns: string[];
}

/**
 * At startup, a table the library needs (`outbox_messages`, `idempotency_keys`, and `outbox_key_locks` on
 * MySQL/MariaDB) is missing or lacks columns. Thrown while the module initializes (`app.init()`), before the app
 * listens. Fix: run the shipped migrations, or `synchronize: true` in development; apps whose migrations run after
 * startup turn the check off with `schemaCheck: false`.
 */
export class OutboxSchemaError extends OutboxConfigurationError {
  constructor(
    message: string,
    /** Name of the DataSource checked ('default' unless named). */
    readonly dataSource: string,
    /** One entry per missing or incomplete table. */
    readonly problems: readonly OutboxSchemaProblem[],
  ) {
    super(message);
  }
}

/**
 * `emit()` was given a `messageId` that is already in the outbox (committed, or written earlier in the same or a
 * concurrent transaction). Thrown inside the caller's transaction, which then rolls back with it (on PostgreSQL
 * the failed statement has already aborted that transaction: let the error propagate).
 */
export class OutboxDuplicateMessageIdError extends OutboxInvalidMessageError {
  constructor(
    message: string,
    /** The id that was reused. */
    readonly messageId: string,
  ) {
    super(message);
  }
}

/**
 * A dead-letter query or operation (`OutboxDeadLetters`) was given an invalid filter, limit or cursor: an unknown
 * filter field, a time that is not epoch milliseconds / a date, a cursor not returned by `page()`. Nothing was
 * changed. A client's mistake: map it to 400.
 */
export class OutboxDeadLetterQueryError extends OutboxInvalidMessageError {}

/**
 * `OutboxConsoleModule.forRoot()` was given no `guard`: the console can requeue and purge messages, so it is not
 * mounted open by accident. Thrown at startup. Fix: pass `guard` (a `CanActivate` class or instance that checks the
 * operator's credentials), or `allowUnguarded: true` when something in front of the app already protects the path.
 */
export class OutboxConsoleUnguardedError extends OutboxConfigurationError {}

/**
 * The `route.select()` function of `OutboxModule` returned a token that is not in `route.clients`, or threw. The
 * message is not lost: it is retried with backoff and, after `retry.maxAttempts`, dead-lettered with this error
 * (requeue it once the route is fixed). Fix: return one of the tokens listed in `route.clients`.
 */
export class OutboxRouteError extends OutboxError {}

/**
 * An in-process handler (`@OnOutboxEvent()`) threw; `cause` is what it threw. Its transaction (with its
 * deduplication record) was rolled back, so the message is retried with backoff like a failed publish.
 */
export class OutboxHandlerFailedError extends OutboxError {
  constructor(
    message: string,
    readonly cause: unknown,
  ) {
    super(message);
  }
}

/**
 * Another transaction holds the deduplication record of an in-process handler for this message right now (a
 * publisher whose lease ran out is still running it). Not a failure of the message: the attempt is given back and
 * the message retried with backoff; the retry skips the handler if that run committed. Given back for
 * `2 × publisher.leaseDuration` after a publisher first found the record held; after that, as a run that never
 * returns, each such attempt counts (an `OutboxHandlerFailedError` wrapping this one).
 */
export class OutboxHandlerInFlightError extends OutboxError {}

/**
 * A message has nowhere to go: the outbox has no broker (`client` / `route`) and no `@OnOutboxEvent()` handler of
 * its pattern. Retried with backoff (a replica with the handler may take it), then dead-lettered. Fix: add a
 * handler of the pattern, or configure a broker, then requeue the dead letters.
 */
export class OutboxNoDestinationError extends OutboxError {}
