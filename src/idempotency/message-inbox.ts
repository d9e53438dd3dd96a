import type { ExecutionContext, Logger } from '@nestjs/common';
import { PATTERN_METADATA } from '@nestjs/microservices/constants';
import { consumerDestination } from '../destinations/destination-names';
import type { OutboxDatabase } from '../dialects/outbox-database';
import type { AttemptHistoryOptions, NewOutboxRow } from '../dialects/outbox-dialect';
import type { OutboxRetryMessage, ResolvedRetryBackoff } from '../retry.options';
import { isFinalFailure, policyFor } from '../util/retry-policy';
import type { EntityManager } from 'typeorm';
import { indexNamesOf, tableNameOf } from '../schema/outbox-table-names';
import { outsideTransactionContext } from '../transaction/transaction-context';
import { runInTransaction } from '../transaction/transaction-runner';
import { incomingHeaders } from '../transports/incoming-headers';
import { MESSAGE_ID_HEADER } from '../outbox.constants';
import { describeError, describeFailure } from '../util/describe-error';
import type { IdempotentCall } from './idempotency.options';

/**
 * Where a broker consumer's failed message goes under `@Idempotent({ retry })`: an inbox row of the outbox, which
 * the relay runs again (see `run-consumer-handler.ts`). Its headers carry what the re-run needs beside the message's
 * own headers: the records' scope (when not the consumer's name) and the fingerprint the record is written with.
 */

/** Header of an inbox row: the scope of the consumer's records, when it is not the consumer's name. */
export const INBOX_SCOPE_HEADER = 'x-outbox-inbox-scope';
/** Header of an inbox row: the fingerprint of the message's data, written with the record as the broker's would be. */
export const INBOX_FINGERPRINT_HEADER = 'x-outbox-inbox-fingerprint';

/** What storing an inbox row needs of the outbox (`IdempotencyService.inbox`). */
export interface InboxTarget {
  database: OutboxDatabase;
  history: AttemptHistoryOptions;
  /** Wakes the outbox's relay after a row is stored, so it runs the row without waiting for its next poll. */
  wake?: () => void;
}

/** The delay before the relay's first retry: `backoff.ts`'s `retryDelay(1, retry)` (initialDelay ± jitter). */
function firstDelay(retry: ResolvedRetryBackoff, random: () => number = Math.random): number {
  const base = Math.min(retry.maxDelay, retry.initialDelay);
  const spread = base * retry.jitter;
  return Math.max(0, Math.min(retry.maxDelay, Math.round(base - spread + random() * 2 * spread)));
}

/** An inbox row of `call`'s message, as stored; and the message as `retryIf` is told of it. */
export interface InboxRowOf {
  row: NewOutboxRow & { destination: string };
  message: OutboxRetryMessage;
}

/**
 * The inbox row of the message `call` delivered (`context`): its id, the handler's first pattern, the data as JSON,
 * its headers with the record's fingerprint (and scope) for the run from the row, key null, destination
 * `consumer:<name>`. Undefined, with a warning, when the data does not serialize.
 */
export function inboxRowOf(
  context: ExecutionContext,
  call: IdempotentCall,
  logger: Pick<Logger, 'warn'>,
): InboxRowOf | undefined {
  const { consumer } = call.options;
  const data: unknown = context.getArgByIndex(0);
  const headers: Record<string, string> = incomingHeaders(data, context.getArgByIndex(1));
  delete headers[MESSAGE_ID_HEADER];
  headers[INBOX_FINGERPRINT_HEADER] = call.fingerprint;
  if (call.scope !== consumer) headers[INBOX_SCOPE_HEADER] = call.scope;
  const patterns: unknown[] = Reflect.getMetadata(PATTERN_METADATA, context.getHandler()) ?? [];
  const pattern = typeof patterns[0] === 'string' ? patterns[0] : JSON.stringify(patterns[0] ?? '');
  let payload: string;
  try {
    payload = JSON.stringify(data === undefined ? null : data);
  } catch (cause) {
    logger.warn(`${consumer}: message ${call.key} cannot be stored as an inbox row (${describeError(cause)}).`);
    return undefined;
  }
  const row = {
    messageId: call.key,
    pattern: pattern.slice(0, 255),
    payload,
    headers: JSON.stringify(headers),
    key: null,
    destination: consumerDestination(consumer, call.scope),
  };
  return { row, message: { ...row, payload: data === undefined ? null : data, headers } };
}

/**
 * Runs `write` (the insert of an inbox row) in a short transaction of its own, outside the handler's. Resolves
 * 'stored', or 'already' when the unique `(message_id, destination)` index refused it (a redelivery of a message
 * whose row exists); rejects with any other error.
 */
export async function insertInboxRow(
  target: InboxTarget,
  write: (manager: EntityManager) => Promise<void>,
): Promise<'stored' | 'already'> {
  const { dataSource, dialect, table } = target.database;
  try {
    await outsideTransactionContext(() => runInTransaction(dataSource, write));
  } catch (cause) {
    const name = tableNameOf(table);
    const index = {
      name: indexNamesOf.messages(name).messageIdUnique,
      table: name,
      columns: ['message_id', 'destination'],
    };
    if (dialect.isUniqueViolation(cause, index)) return 'already';
    throw cause;
  }
  target.wake?.();
  return 'stored';
}

/**
 * Stores the message of a failed first delivery (`call`, its handler already rolled back) as an inbox row, with
 * its error as attempt 1, in a short transaction of its own. Resolves true when the row is stored — or was already
 * (a redelivery after a crash: the unique `(message_id, destination)` index) — so the broker message may be settled;
 * false when it could not be stored (the database is down, the data does not serialize): the caller leaves the
 * message to the broker as before.
 */
export async function storeFailedMessage(
  target: InboxTarget,
  context: ExecutionContext,
  call: IdempotentCall,
  error: unknown,
  logger: Pick<Logger, 'warn'>,
): Promise<boolean> {
  if (!call.options.retry) return false;
  const { consumer } = call.options;
  const built = inboxRowOf(context, call, logger);
  if (!built) return false;
  const { row, message } = built;
  // The policy of the consumer's pattern; `retryIf` is asked about attempt 1, the first delivery.
  const retry = policyFor(call.options.retry, row.pattern);
  const dead = isFinalFailure(retry, error, 1, () => message);
  const failure = { error: describeFailure(error), retryDelay: dead ? 0 : firstDelay(retry), dead };
  const { dialect, table } = target.database;
  try {
    await insertInboxRow(target, (m) => dialect.insertFailed(m, table, row, failure, target.history));
  } catch (cause) {
    logger.warn(
      `${consumer}: message ${call.key} failed and could not be stored for retry (${describeError(cause)}); ` +
        'left to the broker.',
    );
    return false;
  }
  const next = dead ? 'a dead letter at once' : `retried by the relay (attempt 1 of ${retry.maxAttempts})`;
  logger.warn(`${consumer}: message ${call.key} failed (${describeError(error)}); stored as ${next}.`);
  return true;
}

/**
 * `@Idempotent({ mode: 'accept-first' })`: the message of a delivery is stored as an inbox row — the same row a
 * failed message becomes under `retry` (`message-inbox.ts`), with no attempt yet and due at once — and the
 * relay, woken, runs the handler from it (`run-consumer-handler.ts`).
 */

/**
 * Stores the message `call` delivered as an inbox row, in a short transaction of its own. Resolves 'stored', or
 * 'already' when its row exists (a redelivery: the unique `(message_id, destination)` index stores nothing twice);
 * either way the broker message may be settled. Rejects when the row could not be stored (the database is away,
 * the data does not serialize): the message must stay with the broker.
 */
export async function storeAcceptedMessage(
  target: InboxTarget,
  context: ExecutionContext,
  call: IdempotentCall,
  logger: Pick<Logger, 'warn' | 'debug'>,
): Promise<'stored' | 'already'> {
  const built = inboxRowOf(context, call, logger);
  const { consumer } = call.options;
  if (!built)
    throw new TypeError(`${consumer}: message ${call.key} does not serialize to JSON; it cannot be accepted.`);
  const { dialect, table } = target.database;
  let stored: 'stored' | 'already';
  try {
    stored = await insertInboxRow(target, (m) => dialect.insert(m, table, [built.row]));
  } catch (cause) {
    logger.warn(
      `${consumer}: message ${call.key} could not be accepted (${describeError(cause)}); left to the broker.`,
    );
    throw cause;
  }
  if (stored === 'already') logger.debug(`${consumer}: message ${call.key} was accepted before; not stored again.`);
  return stored;
}
