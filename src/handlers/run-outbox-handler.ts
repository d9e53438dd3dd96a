import { OutboxHandlerFailedError, OutboxHandlerInFlightError, OutboxNonRetryableError } from '../errors';
import type { IdempotencyService } from '../idempotency/idempotency.service';
import { trackHandlerStart } from '../idempotency/call-marks';
import { describeError } from '../util/describe-error';
import type { OutboxEventContext } from './outbox-event-context';
import type { OutboxEventHandler } from './outbox-handler-registry';

/** Scope of a handler's deduplication records in the idempotency records' table. */
export function handlerScope(handlerName: string): string {
  return `outbox-handler:${handlerName}`;
}

/** Stored as the records' fingerprint (a handler's record has no request to compare). */
export const HANDLER_FINGERPRINT = 'outbox-handler';

/** The message as a handler gets it. */
export interface HandledMessage {
  messageId: string;
  pattern: string;
  key: string | null;
  headers: Record<string, string>;
  payload: unknown;
  attempts: number;
}

/**
 * Runs one handler for one message, once: in a transaction of its own (the module's transaction source) that takes
 * the record (`outbox-handler:<name>`, message id) first and writes it with the commit. A record already committed
 * means an earlier attempt applied it: skipped. Resolves `applied` or `skipped`; rejects with
 * `OutboxHandlerFailedError` (the handler threw), `OutboxHandlerInFlightError` (another transaction holds the record
 * right now: retried later, the attempt given back) or the handler's own `OutboxNonRetryableError` (dead at once).
 */
export async function runOutboxHandler(
  idempotency: IdempotencyService,
  handler: OutboxEventHandler,
  message: HandledMessage,
): Promise<'applied' | 'skipped'> {
  const scope = handlerScope(handler.name);
  const begun = await idempotency.begin(scope, message.messageId, HANDLER_FINGERPRINT);
  if (begun.kind === 'stored') return 'skipped';
  if (begun.kind === 'in-flight') {
    throw new OutboxHandlerInFlightError(
      `In-process handler ${handler.name} is running message ${message.messageId} in another transaction ` +
        '(a publisher whose lease expired?); retried later, and skipped then if that run committed.',
    );
  }
  const { attempt } = begun;
  const context: OutboxEventContext = {
    messageId: message.messageId,
    pattern: message.pattern,
    key: message.key,
    headers: message.headers,
    attempts: message.attempts,
    handler: handler.name,
  };
  try {
    // What the handler emits records its record as its cause (`trace()`).
    const cause = { dataSource: idempotency.dataSourceName, scope, key: message.messageId };
    await attempt.run(() =>
      trackHandlerStart({ started: true, cause }, () => handler.invoke(message.payload, context)),
    );
  } catch (error) {
    await attempt.rollback().catch(() => undefined);
    if (error instanceof OutboxNonRetryableError) throw error;
    throw new OutboxHandlerFailedError(`In-process handler ${handler.name} failed: ${describeError(error)}`, error);
  }
  const ttl = idempotency.defaults.ttl;
  const won = await attempt.commit({ fingerprint: HANDLER_FINGERPRINT, status: null, body: null, headers: null, ttl });
  return won ? 'applied' : 'skipped';
}
