import { OutboxError, type OutboxErrorCode } from '../../errors';

/**
 * `idempotentStep()` was called where no idempotent call is running: outside a handler guarded by `@Idempotent()`,
 * in one that runs without a key (an optional key the client did not send), or after the handler returned.
 */
export class IdempotentStepOutsideCallError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_STEP_OUTSIDE_CALL';
}

/** The step's name is not a non-empty string of at most 100 characters. */
export class IdempotentStepNameError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_STEP_NAME';
}

/**
 * The step's callback succeeded, but its result cannot be stored as JSON (a BigInt, a circular structure): the
 * external call happened and was not recorded. Return plain JSON data from the callback.
 */
export class IdempotentStepResultError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_STEP_RESULT';
}

/**
 * On SQLite a step cannot commit its result once the handler has written in its transaction (SQLite has one
 * connection, so the step's commit would commit those writes too), nor inside a nested `transaction()`.
 */
export class IdempotentStepOrderError extends OutboxError {
  override readonly code: OutboxErrorCode = 'OUTBOX_STEP_ORDER';
}
