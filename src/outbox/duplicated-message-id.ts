import type { OutboxDatabase } from '../dialects/outbox-database';
import { OutboxDuplicateMessageIdError } from '../errors';
import { indexNamesOf, tableNameOf } from '../schema/outbox-table-names';

/** `OutboxDuplicateMessageIdError` when `error` is a violation of the message-id unique index, else undefined. */
export function duplicateIdError(
  database: OutboxDatabase,
  call: string,
  messageIds: readonly string[],
  error: unknown,
): OutboxDuplicateMessageIdError | undefined {
  const { dialect, table } = database;
  const name = tableNameOf(table);
  const index = {
    name: indexNamesOf.messages(name).messageIdUnique,
    table: name,
    columns: ['message_id', 'destination'],
  };
  if (!dialect.isUniqueViolation(error, index)) return undefined;
  const messageId = messageIds.length === 1 ? messageIds[0] : duplicatedId(messageIds, error);
  const which =
    messageId === undefined
      ? `one of the ${messageIds.length} message ids`
      : `the message id ${JSON.stringify(messageId)}`;
  return new OutboxDuplicateMessageIdError(
    `${call}: ${which} is already in the outbox (message ids ` +
      'are unique; consumers deduplicate by them). Leave messageId out to get a new UUIDv7, or derive it from ' +
      'something unique to this event. Let this error roll the transaction back (on PostgreSQL the ' +
      'transaction is already aborted).',
    messageId ?? '',
  );
}

/**
 * The id a database's unique-violation message names, if any: PostgreSQL's detail `Key (message_id,
 * destination)=(<id>, <destination>)`, MySQL's `Duplicate entry '<id>-<destination>'`. The longest id that fits wins
 * (an id may be a prefix of another).
 */
export function duplicatedId(messageIds: readonly string[], error: unknown): string | undefined {
  const e = error as { detail?: unknown; message?: unknown; driverError?: { detail?: unknown; message?: unknown } };
  const text = [e?.detail, e?.driverError?.detail, e?.message, e?.driverError?.message].map(String).join('\n');
  const named = (id: string) => [`=(${id})`, `=(${id}, `, `'${id}'`, `'${id}-`].some((form) => text.includes(form));
  return messageIds
    .filter(named)
    .sort((a, b) => b.length - a.length)
    .at(0);
}
