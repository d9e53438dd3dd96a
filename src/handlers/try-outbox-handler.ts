import type { DataSource } from 'typeorm';
import { OutboxHandlerInFlightError } from '../errors';
import type { IdempotencyService } from '../idempotency/idempotency.service';
import type { OutboxEventContext } from './outbox-event-context';
import type { OutboxEventHandler } from './outbox-handler-registry';
import { HANDLER_FINGERPRINT, HandledMessage, handlerScope } from './run-outbox-handler';
import { tryUnderRecord } from './try-under-record';

/**
 * Runs one handler for one message as `runOutboxHandler()` would, in a transaction of the outbox's DataSource that
 * is always rolled back (`runRolledBack()`): the handler's record is taken (the same locks, released with the
 * rollback) and the handler runs with `context.dryRun` true; nothing is committed, no record is written. Resolves
 * `skipped` when a committed record shows an earlier attempt applied it (a requeue would skip it too), `ran` when it
 * ran to its end; rejects with what the handler threw, or `OutboxHandlerInFlightError` when another transaction
 * holds its record right now.
 */
export function tryOutboxHandler(
  dataSource: DataSource,
  idempotency: IdempotencyService,
  handler: OutboxEventHandler,
  message: HandledMessage,
): Promise<'ran' | 'skipped'> {
  const record = { scope: handlerScope(handler.name), key: message.messageId, fingerprint: HANDLER_FINGERPRINT };
  const inFlight = () =>
    new OutboxHandlerInFlightError(
      `In-process handler ${handler.name} is running message ${message.messageId} in another transaction right ` +
        'now: try again once it has ended.',
    );
  const context: OutboxEventContext = {
    messageId: message.messageId,
    pattern: message.pattern,
    key: message.key,
    headers: message.headers,
    attempts: message.attempts,
    handler: handler.name,
    dryRun: true,
  };
  return tryUnderRecord(dataSource, idempotency, record, inFlight, () => handler.invoke(message.payload, context));
}
