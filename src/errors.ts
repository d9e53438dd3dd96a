/**
 * Named errors. Every message says what went wrong and how to fix it, and every error carries a `code`: the few
 * classes an app catches are exported from `nestjs-outbox`; the others are recognised by `error.code`.
 */

/**
 * The `code` of each error this library throws on purpose (`error instanceof OutboxError`), one per class:
 *
 * - `OUTBOX_CONFIGURATION`: an option of `forRoot()`, `@Idempotent()`, `@OnOutboxEvent()`, … is invalid (startup).
 * - `OUTBOX_SCHEMA`: a table the library needs is missing or lacks columns (startup; an `OutboxConfigurationError`
 *   with `dataSource` and `problems`).
 * - `OUTBOX_ACK_MODE`: a consumer's `manualAck` contradicts how its RabbitMQ consumer acknowledges (startup; an
 *   `OutboxConfigurationError`).
 * - `OUTBOX_CONSOLE_UNGUARDED`: `OutboxConsoleModule.forRoot()` has no `guard` (startup; an `OutboxConfigurationError`).
 * - `OUTBOX_NO_TRANSACTION`: `emit()` or `OutboxService.manager` found no transaction to join.
 * - `OUTBOX_INVALID_MESSAGE`: `emit()` (or `once()`) was given arguments that cannot become an outbox row.
 * - `OUTBOX_SERIALIZATION`: the payload or headers do not survive JSON (an `OutboxInvalidMessageError`).
 * - `OUTBOX_DUPLICATE_MESSAGE_ID`: `emit()` reused a message id (an `OutboxInvalidMessageError` with `messageId`).
 * - `OUTBOX_DEAD_LETTER_QUERY`: an invalid dead-letter filter, limit or cursor (an `OutboxInvalidMessageError`).
 * - `OUTBOX_TRACE_QUERY`: `OutboxService.trace()` got an invalid id or option (an `OutboxInvalidMessageError`).
 * - `OUTBOX_EDIT_DISABLED`: `OutboxDeadLetters.editAndRequeue()` was called without `deadLetters.allowEdit: true`.
 * - `OUTBOX_EDIT_INVALID`: an edit of a dead letter was given an invalid payload, headers, reason or actor (an
 *   `OutboxInvalidMessageError`).
 * - `OUTBOX_MESSAGE_NOT_FOUND`: an edit named a message id the outbox has no row of.
 * - `OUTBOX_NOT_DEAD`: an edit named a message that is not (or no longer) a dead letter — pending, sent, or already
 *   replaced by an earlier edit (`status`, `replacedBy`).
 * - `OUTBOX_NON_RETRYABLE`: thrown by the app from a publish path to dead-letter a message at once.
 * - `OUTBOX_PUBLISH_TIMEOUT`: a publish did not complete within `publisher.publishTimeout` (retried).
 * - `OUTBOX_CIRCUIT_OPEN`: a publish was not attempted: its broker's circuit breaker is open (retried, not counted).
 * - `OUTBOX_ROUTE`: `route.select()` returned an unknown token or threw (retried, then dead-lettered).
 * - `OUTBOX_HANDLER_FAILED`: an `@OnOutboxEvent()` handler threw (`cause`); retried with backoff.
 * - `OUTBOX_HANDLER_IN_FLIGHT`: another transaction runs the same in-process handler for this message right now.
 * - `OUTBOX_NO_DESTINATION`: a message has no broker and no in-process handler of its pattern.
 * - `OUTBOX_STEP_OUTSIDE_CALL`: `idempotentStep()` was called where no idempotent call runs.
 * - `OUTBOX_STEP_NAME`: a step's name is empty or longer than 100 characters.
 * - `OUTBOX_STEP_RESULT`: a step's result cannot be stored as JSON.
 * - `OUTBOX_STEP_ORDER`: on SQLite, a step ran after the handler wrote, or inside a nested `transaction()`.
 * - `OUTBOX_IN_TRANSACTION`: a call that must open a transaction of its own (a dry run) was made inside one.
 * - `OUTBOX_WAL_UNAVAILABLE`: `publisher.mode: 'wal'` was asked for but the database cannot stream its WAL (startup).
 * - `OUTBOX_JSON_TOO_DEEP`: a request body or message is nested too deeply to fingerprint (answered with a 400).
 */
export type OutboxErrorCode =
  | 'OUTBOX_CONFIGURATION'
  | 'OUTBOX_SCHEMA'
  | 'OUTBOX_ACK_MODE'
  | 'OUTBOX_CONSOLE_UNGUARDED'
  | 'OUTBOX_NO_TRANSACTION'
  | 'OUTBOX_INVALID_MESSAGE'
  | 'OUTBOX_SERIALIZATION'
  | 'OUTBOX_DUPLICATE_MESSAGE_ID'
  | 'OUTBOX_DEAD_LETTER_QUERY'
  | 'OUTBOX_TRACE_QUERY'
  | 'OUTBOX_EDIT_DISABLED'
  | 'OUTBOX_EDIT_INVALID'
  | 'OUTBOX_MESSAGE_NOT_FOUND'
  | 'OUTBOX_NOT_DEAD'
  | 'OUTBOX_NON_RETRYABLE'
  | 'OUTBOX_PUBLISH_TIMEOUT'
  | 'OUTBOX_CIRCUIT_OPEN'
  | 'OUTBOX_ROUTE'
  | 'OUTBOX_HANDLER_FAILED'
  | 'OUTBOX_HANDLER_IN_FLIGHT'
  | 'OUTBOX_NO_DESTINATION'
  | 'OUTBOX_STEP_OUTSIDE_CALL'
  | 'OUTBOX_STEP_NAME'
  | 'OUTBOX_STEP_RESULT'
  | 'OUTBOX_STEP_ORDER'
  | 'OUTBOX_IN_TRANSACTION'
  | 'OUTBOX_JSON_TOO_DEEP'
  | 'OUTBOX_WAL_UNAVAILABLE';

/** Base class of every error this library throws on purpose; `code` tells them apart. */
export abstract class OutboxError extends Error {
  /** Which error this is (see `OutboxErrorCode`); stable across releases, unlike the message. */
  abstract readonly code: OutboxErrorCode;

  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** An option passed to `OutboxModule.forRoot()` / `forRootAsync()` is invalid. Thrown at startup. */
export class OutboxConfigurationError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_CONFIGURATION';
}

/**
 * `emit()` (or `OutboxService.manager`) was used with no transaction to join: neither an explicit
 * `manager` nor an ambient transaction opened by `OutboxService.transaction()` / `@Idempotent()`.
 */
export class OutboxNoTransactionError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_NO_TRANSACTION';
}

/** `emit()` was called with arguments that cannot become an outbox row (empty pattern, bad key, …). */
export class OutboxInvalidMessageError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_INVALID_MESSAGE';
}

/** The payload or headers given to `emit()` do not survive JSON serialization (BigInt, cycles, functions, …). */
export class OutboxSerializationError extends OutboxInvalidMessageError {
  override readonly code: OutboxErrorCode = 'OUTBOX_SERIALIZATION';
}

/**
 * Throw this (or a subclass) from a publish path to mark a failure as permanent: the message is dead-lettered
 * at once instead of being retried.
 */
export class OutboxNonRetryableError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_NON_RETRYABLE';
}

/**
 * A message's expiry (`emit()`'s `expiresIn` / `expiresAt`) passed before it could be published: it is not sent,
 * and becomes a dead letter (or is dropped, `publisher.onExpired`). The last error of such a dead letter.
 */
export class OutboxMessageExpiredError extends OutboxNonRetryableError {}

/** A publish did not complete within `publisher.publishTimeout`. Its outcome is unknown: it is retried. */
export class OutboxPublishTimeoutError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_PUBLISH_TIMEOUT';
}

/**
 * A publish was not attempted because its broker's circuit breaker is open (`publisher.circuitBreaker`): the message
 * waits `retryAfterMs` (the rest of the cool-down), its attempt given back. The last error of such a row while it
 * waits; never a dead letter's.
 */
export class OutboxCircuitOpenError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_CIRCUIT_OPEN';

  constructor(
    message: string,
    /** Milliseconds until the breaker lets a probe through. */
    readonly retryAfterMs: number,
  ) {
    super(message);
  }
}

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
  override readonly code: OutboxErrorCode = 'OUTBOX_SCHEMA';

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
  override readonly code: OutboxErrorCode = 'OUTBOX_DUPLICATE_MESSAGE_ID';

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
export class OutboxDeadLetterQueryError extends OutboxInvalidMessageError {
  override readonly code: OutboxErrorCode = 'OUTBOX_DEAD_LETTER_QUERY';
}

/**
 * `OutboxService.trace()` was given an invalid id (not a string of 1 to 255 characters) or option (`scope` not a
 * string, `depth` not an integer from 1 to 20). Nothing was read. A client's mistake: map it to 400.
 */
export class OutboxTraceQueryError extends OutboxInvalidMessageError {
  override readonly code: OutboxErrorCode = 'OUTBOX_TRACE_QUERY';
}

/**
 * `OutboxDeadLetters.editAndRequeue()` was called, but editing dead letters is off: it is opt-in, as it changes
 * what a producer wrote. Nothing was changed. Fix: set `deadLetters: { allowEdit: true }` in `OutboxModule.forRoot()`
 * (the console answers 403 meanwhile and shows no Edit button).
 */
export class OutboxEditDisabledError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_EDIT_DISABLED';
}

/**
 * An edit of a dead letter (`OutboxDeadLetters.editAndRequeue()`) was given a payload that does not survive JSON,
 * headers that are not a map of strings (or that set a header the library writes), a reason or actor that is not a
 * short string, or nothing to change. Nothing was changed. A client's mistake: map it to 400.
 */
export class OutboxEditInvalidError extends OutboxInvalidMessageError {
  override readonly code: OutboxErrorCode = 'OUTBOX_EDIT_INVALID';
}

/** An operation on one message named an id (and destination) the outbox has no row of. Map it to 404. */
export class OutboxMessageNotFoundError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_MESSAGE_NOT_FOUND';

  constructor(
    message: string,
    /** The id asked for. */
    readonly messageId: string,
  ) {
    super(message);
  }
}

/**
 * An edit named a message that is not a dead letter (any more): pending or in flight, sent, or already replaced by
 * an earlier edit — of two concurrent edits of one message, exactly one succeeds and the other gets this. Nothing
 * was changed. Map it to 409; read the message again (`get()`) before deciding.
 */
export class OutboxNotDeadError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_NOT_DEAD';

  constructor(
    message: string,
    /** The id asked for. */
    readonly messageId: string,
    /** The row's status now (`pending`, `sent`, `replaced`), or null when it vanished meanwhile. */
    readonly status: string | null,
    /** The id of the corrected copy when the message was already replaced, else null. */
    readonly replacedBy: string | null,
  ) {
    super(message);
  }
}

/**
 * `OutboxConsoleModule.forRoot()` was given no `guard`: the console can requeue and purge messages, so it is not
 * mounted open by accident. Thrown at startup. Fix: pass `guard` (a `CanActivate` class or instance that checks the
 * operator's credentials), or `allowUnguarded: true` when something in front of the app already protects the path.
 */
export class OutboxConsoleUnguardedError extends OutboxConfigurationError {
  override readonly code: OutboxErrorCode = 'OUTBOX_CONSOLE_UNGUARDED';
}

/**
 * `@Idempotent({ manualAck })` (or the module's `idempotency.manualAck`) contradicts the RabbitMQ consumer that
 * delivers the handler's messages: `manualAck: true` on a `noAck: true` consumer (an ack closes the channel),
 * `manualAck: false` on a `noAck: false` consumer no other handler acks for (its messages stay unacknowledged), a
 * pattern shared by several handlers with none chosen to ack, or one handler on queues with different ack modes.
 * Thrown at startup; the message names the handler, the queue, both settings and the fix. Not exported by class:
 * `error.code === 'OUTBOX_ACK_MODE'` (or `instanceof OutboxConfigurationError`).
 */
export class OutboxAckModeError extends OutboxConfigurationError {
  override readonly code: OutboxErrorCode = 'OUTBOX_ACK_MODE';
}

/**
 * The `route.select()` function of `OutboxModule` returned a token that is not in `route.clients`, or threw. The
 * message is not lost: it is retried with backoff and, after `retry.maxAttempts`, dead-lettered with this error
 * (requeue it once the route is fixed). Fix: return one of the tokens listed in `route.clients`.
 */
export class OutboxRouteError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_ROUTE';
}

/**
 * An in-process handler (`@OnOutboxEvent()`) threw; `cause` is what it threw. Its transaction (with its
 * deduplication record) was rolled back, so the message is retried with backoff like a failed publish.
 */
export class OutboxHandlerFailedError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_HANDLER_FAILED';

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
export class OutboxHandlerInFlightError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_HANDLER_IN_FLIGHT';
}

/**
 * A message has nowhere to go: the outbox has no broker (`client` / `route`) and no `@OnOutboxEvent()` handler of
 * its pattern. Retried with backoff (a replica with the handler may take it), then dead-lettered. Fix: add a
 * handler of the pattern, or configure a broker, then requeue the dead letters.
 */
export class OutboxNoDestinationError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_NO_DESTINATION';
}

/**
 * A call that must run in transactions of its own, always rolled back (`OutboxDeadLetters.dryRun()`), was made
 * inside a transaction of the outbox's DataSource (`OutboxService.transaction()`, `@Idempotent()`, or a plugged-in
 * source's such as nestjs-cls's `@Transactional()`). Fix: call it outside any transaction.
 */
export class OutboxInTransactionError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_IN_TRANSACTION';
}

/**
 * `publisher.mode: 'wal'` was asked for, but this outbox's database cannot stream its write-ahead log: not
 * PostgreSQL, `wal_level` is not `logical`, the role lacks `REPLICATION`, or the publication or replication slot
 * cannot be made. Thrown at startup; the message says which and how to fix it. `mode: 'wal-or-poll'` logs the same
 * and polls instead.
 */
export class OutboxWalUnavailableError extends OutboxConfigurationError {
  override readonly code: OutboxErrorCode = 'OUTBOX_WAL_UNAVAILABLE';
}
