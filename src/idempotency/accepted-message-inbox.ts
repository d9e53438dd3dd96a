import type { ExecutionContext, Logger } from '@nestjs/common';
import { describeError } from '../util/describe-error';
import { type InboxTarget, inboxRowOf, insertInboxRow } from './failed-message-inbox';
import type { IdempotentCall } from './idempotent-call.types';

/**
 * `@Idempotent({ mode: 'accept-first' })`: the message of a delivery is stored as an inbox row — the same row a
 * failed message becomes under `retry` (`failed-message-inbox.ts`), with no attempt yet and due at once — and the
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
