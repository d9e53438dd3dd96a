import type { DataSource } from 'typeorm';
import type { ClaimedOutboxRow } from '../dialects/outbox-dialect';
import { OutboxHandlerFailedError, OutboxHandlerInFlightError, OutboxNonRetryableError } from '../errors';
import type { ConsumerHandler } from '../idempotency/consumer-registry';
import { INBOX_FINGERPRINT_HEADER, INBOX_SCOPE_HEADER } from '../idempotency/message-inbox';
import { rememberIdempotencyKey, trackHandlerStart } from '../idempotency/call-marks';
import type { IdempotencyService } from '../idempotency/idempotency.service';
import { serializeBody } from '../idempotency/http-request';
import { OutboxRetryContext } from '../transports/outbox-retry.context';
import { tryUnderRecord } from './try-under-record';
import { describeError } from '../util/describe-error';

/** What a run reads of an inbox row. */
type InboxRow = Pick<ClaimedOutboxRow, 'messageId' | 'payload' | 'headers' | 'attempts'>;

/**
 * Runs a broker consumer again from its inbox row (a message whose delivery failed under `@Idempotent({ retry })`),
 * once: the same record as the broker's deliveries — (scope, message id), taken first in a transaction of its own
 * and written with the commit — so a broker redelivery racing the row never applies it twice. A record already
 * committed (a redelivery applied it): skipped. The handler gets the stored data through its param decorators and
 * pipes, an `OutboxRetryContext` as its `@Ctx()` and the message id as its `@IdempotencyKey()`. Rejects as `runOutboxHandler()` does: `OutboxHandlerFailedError`,
 * `OutboxHandlerInFlightError` (attempt given back) or the handler's `OutboxNonRetryableError` (dead at once).
 */
export async function runConsumerHandler(
  idempotency: IdempotencyService,
  handler: ConsumerHandler,
  row: ClaimedOutboxRow,
): Promise<'applied' | 'skipped'> {
  const call = consumerCall(handler, row, false);
  const begun = await idempotency.begin(call.scope, row.messageId, call.fingerprint);
  if (begun.kind === 'stored') return 'skipped';
  if (begun.kind === 'in-flight') throw inFlight(handler, row);
  const { attempt } = begun;
  let value: unknown;
  try {
    // What the handler emits records the consumer's record as its cause (`trace()`), as on the broker's delivery.
    const cause = { dataSource: idempotency.dataSourceName, scope: call.scope, key: row.messageId };
    value = await attempt.run(() => trackHandlerStart({ started: true, cause }, () => call.invoke()));
  } catch (error) {
    await attempt.rollback().catch(() => undefined);
    if (error instanceof OutboxNonRetryableError) throw error;
    throw new OutboxHandlerFailedError(`Consumer ${handler.name} failed: ${describeError(error)}`, error);
  }
  const body = serializeBody(value);
  const won = await attempt.commit({
    fingerprint: call.fingerprint,
    status: null,
    body,
    headers: null,
    ttl: handler.ttl,
  });
  return won ? 'applied' : 'skipped';
}

/**
 * Runs a broker consumer on its dead inbox row as `runConsumerHandler()` would, in a transaction of the outbox's
 * DataSource that is always rolled back (`OutboxDeadLetters.dryRun()`): the record is taken (its locks end with the
 * rollback), the handler runs with `context.isDryRun()` true, nothing is committed. Resolves `skipped` when a
 * committed record shows the message applied (a requeue would skip it too), `ran` when the handler ran to its
 * end; rejects with what it threw, or `OutboxHandlerInFlightError` while another transaction holds its record.
 */
export function tryConsumerHandler(
  dataSource: DataSource,
  idempotency: IdempotencyService,
  handler: ConsumerHandler,
  row: InboxRow,
): Promise<'ran' | 'skipped'> {
  const call = consumerCall(handler, row, true);
  const record = { scope: call.scope, key: row.messageId, fingerprint: call.fingerprint };
  return tryUnderRecord(
    dataSource,
    idempotency,
    record,
    () => inFlight(handler, row),
    () => call.invoke(),
  );
}

/** What a run of `handler` on inbox row `row` needs: its records' scope and fingerprint, and the call itself. */
function consumerCall(handler: ConsumerHandler, row: InboxRow, dryRun: boolean) {
  const stored: Record<string, string> = row.headers ? JSON.parse(row.headers) : {};
  const scope = stored[INBOX_SCOPE_HEADER] ?? handler.name;
  const fingerprint = stored[INBOX_FINGERPRINT_HEADER] ?? '';
  const headers = { ...stored };
  delete headers[INBOX_SCOPE_HEADER];
  delete headers[INBOX_FINGERPRINT_HEADER];
  const context = new OutboxRetryContext([row.messageId, handler.pattern, headers, row.attempts, dryRun]);
  const payload: unknown = JSON.parse(row.payload);
  // `@IdempotencyKey()` reads the key the interceptor accepted for the call; on a re-run the relay accepted it.
  const args = [payload, context];
  rememberIdempotencyKey({ getType: () => 'rpc', getArgByIndex: (i: number) => args[i] } as never, row.messageId);
  return { scope, fingerprint, invoke: () => handler.invoke(payload, context) };
}

function inFlight(handler: ConsumerHandler, row: InboxRow): OutboxHandlerInFlightError {
  return new OutboxHandlerInFlightError(
    `Consumer ${handler.name} is handling message ${row.messageId} in another transaction (a broker ` +
      'redelivery?); retried later, and skipped then if that run committed.',
  );
}
