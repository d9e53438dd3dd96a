import * as publicApi from './index';
import * as errors from './errors';
import { OutboxError, type OutboxErrorCode } from './errors';
import * as stepErrors from './idempotency/steps/step-scope';
import { JsonNestingTooDeepError } from './idempotency/fingerprint';

/** Every error class of the library, by name, built the way the library builds it. */
const thrown: Record<string, OutboxError> = {
  OutboxConfigurationError: new errors.OutboxConfigurationError('m'),
  OutboxNoTransactionError: new errors.OutboxNoTransactionError('m'),
  OutboxInvalidMessageError: new errors.OutboxInvalidMessageError('m'),
  OutboxSerializationError: new errors.OutboxSerializationError('m'),
  OutboxNonRetryableError: new errors.OutboxNonRetryableError('m'),
  OutboxPublishTimeoutError: new errors.OutboxPublishTimeoutError('m'),
  OutboxSchemaError: new errors.OutboxSchemaError('m', 'default', []),
  OutboxDuplicateMessageIdError: new errors.OutboxDuplicateMessageIdError('m', 'id-1'),
  OutboxDeadLetterQueryError: new errors.OutboxDeadLetterQueryError('m'),
  OutboxTraceQueryError: new errors.OutboxTraceQueryError('m'),
  OutboxEditDisabledError: new errors.OutboxEditDisabledError('m'),
  OutboxEditInvalidError: new errors.OutboxEditInvalidError('m'),
  OutboxMessageNotFoundError: new errors.OutboxMessageNotFoundError('m', 'id-1'),
  OutboxNotDeadError: new errors.OutboxNotDeadError('m', 'id-1', 'sent', null),
  OutboxConsoleUnguardedError: new errors.OutboxConsoleUnguardedError('m'),
  OutboxRouteError: new errors.OutboxRouteError('m'),
  OutboxHandlerFailedError: new errors.OutboxHandlerFailedError('m', new Error('cause')),
  OutboxHandlerInFlightError: new errors.OutboxHandlerInFlightError('m'),
  OutboxNoDestinationError: new errors.OutboxNoDestinationError('m'),
  OutboxInTransactionError: new errors.OutboxInTransactionError('m'),
  IdempotentStepOutsideCallError: new stepErrors.IdempotentStepOutsideCallError('m'),
  IdempotentStepNameError: new stepErrors.IdempotentStepNameError('m'),
  IdempotentStepResultError: new stepErrors.IdempotentStepResultError('m'),
  IdempotentStepOrderError: new stepErrors.IdempotentStepOrderError('m'),
  JsonNestingTooDeepError: new JsonNestingTooDeepError(3),
  OutboxWalUnavailableError: new errors.OutboxWalUnavailableError('m'),
  OutboxAckModeError: new errors.OutboxAckModeError('m'),
};

/** Each class's code: one per class, so `error.code` tells apart the classes that are not exported. */
const expected: Record<string, OutboxErrorCode> = {
  OutboxConfigurationError: 'OUTBOX_CONFIGURATION',
  OutboxNoTransactionError: 'OUTBOX_NO_TRANSACTION',
  OutboxInvalidMessageError: 'OUTBOX_INVALID_MESSAGE',
  OutboxSerializationError: 'OUTBOX_SERIALIZATION',
  OutboxNonRetryableError: 'OUTBOX_NON_RETRYABLE',
  OutboxPublishTimeoutError: 'OUTBOX_PUBLISH_TIMEOUT',
  OutboxSchemaError: 'OUTBOX_SCHEMA',
  OutboxDuplicateMessageIdError: 'OUTBOX_DUPLICATE_MESSAGE_ID',
  OutboxDeadLetterQueryError: 'OUTBOX_DEAD_LETTER_QUERY',
  OutboxTraceQueryError: 'OUTBOX_TRACE_QUERY',
  OutboxEditDisabledError: 'OUTBOX_EDIT_DISABLED',
  OutboxEditInvalidError: 'OUTBOX_EDIT_INVALID',
  OutboxMessageNotFoundError: 'OUTBOX_MESSAGE_NOT_FOUND',
  OutboxNotDeadError: 'OUTBOX_NOT_DEAD',
  OutboxConsoleUnguardedError: 'OUTBOX_CONSOLE_UNGUARDED',
  OutboxRouteError: 'OUTBOX_ROUTE',
  OutboxHandlerFailedError: 'OUTBOX_HANDLER_FAILED',
  OutboxHandlerInFlightError: 'OUTBOX_HANDLER_IN_FLIGHT',
  OutboxNoDestinationError: 'OUTBOX_NO_DESTINATION',
  OutboxInTransactionError: 'OUTBOX_IN_TRANSACTION',
  IdempotentStepOutsideCallError: 'OUTBOX_STEP_OUTSIDE_CALL',
  IdempotentStepNameError: 'OUTBOX_STEP_NAME',
  IdempotentStepResultError: 'OUTBOX_STEP_RESULT',
  IdempotentStepOrderError: 'OUTBOX_STEP_ORDER',
  JsonNestingTooDeepError: 'OUTBOX_JSON_TOO_DEEP',
  OutboxWalUnavailableError: 'OUTBOX_WAL_UNAVAILABLE',
  OutboxAckModeError: 'OUTBOX_ACK_MODE',
};

describe('errors: one OutboxError base, a code per class', () => {
  it.each(Object.entries(thrown))('%s is an OutboxError named after its class, with its own code', (name, error) => {
    expect(error).toBeInstanceOf(OutboxError);
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe(name);
    expect(error.code).toBe(expected[name]);
  });

  it('gives every class a different code', () => {
    const codes = Object.values(thrown).map((error) => error.code);
    expect(new Set(codes).size).toBe(codes.length);
  });

  it('keeps the hierarchy an app catches by: subclasses are instances of their exported parent', () => {
    expect(thrown.OutboxSchemaError).toBeInstanceOf(publicApi.OutboxConfigurationError);
    expect(thrown.OutboxConsoleUnguardedError).toBeInstanceOf(publicApi.OutboxConfigurationError);
    expect(thrown.OutboxAckModeError).toBeInstanceOf(publicApi.OutboxConfigurationError);
    expect(thrown.OutboxSerializationError).toBeInstanceOf(publicApi.OutboxInvalidMessageError);
    expect(thrown.OutboxDuplicateMessageIdError).toBeInstanceOf(publicApi.OutboxInvalidMessageError);
    expect(thrown.OutboxDeadLetterQueryError).toBeInstanceOf(publicApi.OutboxInvalidMessageError);
    expect(thrown.OutboxTraceQueryError).toBeInstanceOf(publicApi.OutboxInvalidMessageError);
  });

  it('exports from nestjs-outbox only the error classes an app catches or throws', () => {
    const exported = Object.entries(publicApi)
      .filter(([, value]) => typeof value === 'function' && value.prototype instanceof Error)
      .map(([name]) => name)
      .sort();
    expect(exported).toEqual([
      'IdempotencyProblemException',
      'OutboxConfigurationError',
      'OutboxError',
      'OutboxInvalidMessageError',
      'OutboxNoTransactionError',
      'OutboxNonRetryableError',
    ]);
  });

  it("keeps the subclass's code when an app extends OutboxNonRetryableError", () => {
    class PaymentDeclined extends publicApi.OutboxNonRetryableError {}
    const error = new PaymentDeclined('declined');
    expect(error.code).toBe('OUTBOX_NON_RETRYABLE');
    expect(error.name).toBe('PaymentDeclined');
  });
});
