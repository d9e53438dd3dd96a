import type { OutboxDatabase } from '../dialects/outbox-database';
import { OutboxDeadLetterQueryError } from '../errors';
import { runOnConnection } from '../transaction/transaction-runner';
import { redactSecrets } from '../util/redact-secrets';
import { parseEditAudit } from './dead-letter-edit';
import { REPLACES_HEADER } from '../outbox.constants';
import type { OutboxMessageDetail } from './dead-letter.model';

/**
 * One message with its history (see `OutboxDeadLetters.get()`): the row of `destination` when given, else its first
 * dead row, else its first unsent one, else its replaced one, else its first — and, for an edited dead letter or its
 * copy, the edit's audit.
 */
export async function readMessageDetail(
  database: OutboxDatabase,
  messageId: string,
  destination?: string,
): Promise<OutboxMessageDetail | null> {
  if (typeof messageId !== 'string' || messageId.length === 0 || messageId.length > 255) {
    throw new OutboxDeadLetterQueryError(
      `OutboxDeadLetters.get() takes a message id (a non-empty string of at most 255 characters), got ` +
        `${JSON.stringify(String(messageId))}. Pass the messageId of a listed message.`,
    );
  }
  if (destination !== undefined && (typeof destination !== 'string' || destination.length > 255)) {
    throw new OutboxDeadLetterQueryError(
      'OutboxDeadLetters.get() takes as destination a string of at most 255 characters (a listed ' +
        "message's destination). Leave it out for the message's first dead row.",
    );
  }
  const { dataSource, dialect, table } = database;
  const messages = () => database.entities.message;
  return runOnConnection(dataSource, async (m) => {
    const rows = await m.getRepository(messages()).find({ where: { messageId }, order: { seq: 'ASC' } });
    const row =
      destination !== undefined
        ? rows.find((r) => r.destination === destination)
        : (rows.find((r) => r.status === 'dead') ??
          rows.find((r) => r.status === 'pending') ??
          rows.find((r) => r.status === 'replaced') ??
          rows[0]);
    if (!row) return null;
    const history = await dialect.listAttempts(m, table, row.seq);
    const replaces = replacesOf(row.headers);
    let edit = row.status === 'replaced' ? parseEditAudit(row.editAudit) : null;
    if (!edit && replaces !== null) {
      const originals = await m
        .getRepository(messages())
        .find({ where: { messageId: replaces, status: 'replaced' }, order: { seq: 'ASC' } });
      edit = originals.map((o) => parseEditAudit(o.editAudit)).find((a) => a?.replacedBy === messageId) ?? null;
    }
    return {
      messageId: row.messageId,
      pattern: row.pattern,
      key: row.key,
      destination: row.destination,
      destinations: rows.map((r) => ({ destination: r.destination, status: r.status, attempts: r.attempts })),
      status: row.status,
      attempts: row.attempts,
      createdAt: row.createdAt.getTime(),
      deadAt: row.deadAt ? row.deadAt.getTime() : null,
      lastError: row.lastError === null ? null : redactSecrets(row.lastError),
      payload: row.payload,
      headers: row.headers,
      availableAt: row.availableAt.getTime(),
      sentAt: row.sentAt ? row.sentAt.getTime() : null,
      history: history.map((a) => ({ ...a, error: redactSecrets(a.error) })),
      replacedBy: row.status === 'replaced' ? (edit?.replacedBy ?? null) : null,
      replaces: edit && edit.replacedBy === row.messageId ? replaces : null,
      edit,
    };
  });
}

/** The `x-outbox-replaces` header of stored headers, or null. */
function replacesOf(headers: string | null): string | null {
  if (headers === null) return null;
  try {
    const value = (JSON.parse(headers) as Record<string, unknown>)?.[REPLACES_HEADER];
    return typeof value === 'string' ? value : null;
  } catch {
    return null;
  }
}
