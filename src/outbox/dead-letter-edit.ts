import type { OutboxDatabase } from '../dialects/outbox-database';
import {
  OutboxEditDisabledError,
  OutboxEditInvalidError,
  OutboxMessageNotFoundError,
  OutboxNotDeadError,
  OutboxSerializationError,
} from '../errors';
import { INBOX_FINGERPRINT_HEADER, INBOX_SCOPE_HEADER } from '../idempotency/message-inbox';
import { MESSAGE_ID_HEADER, REPLACES_HEADER } from '../outbox.constants';
import type { OutboxRelayRegistry } from '../scheduling/outbox-relay.registry';
import type { OutboxMessage } from '../schema/outbox-message.entity';
import { outsideTransactionContext } from '../transaction/transaction-context';
import { refuseInTransaction, runInTransaction, runOnConnection } from '../transaction/transaction-runner';
import type { DeadLetterEdit, DeadLetterEditAudit, DeadLetterEditResult } from './dead-letter-edit.types';
import { jsonChanges } from './json-changes';
import { redactSecrets } from '../util/redact-secrets';
import { newMessageId } from './new-message-id';
import { serializeJson } from './serialize-json';

const CALL = 'OutboxDeadLetters.editAndRequeue()';
const EDIT_FIELDS = ['payload', 'headers', 'reason', 'actor', 'destination'];
/**
 * Headers the library writes and an edit cannot set: the message id, the copy's `x-outbox-replaces`, and what a
 * consumer's inbox row needs to run again (its records' scope and fingerprint, kept from the original).
 */
export const LIBRARY_HEADERS: readonly string[] = [
  MESSAGE_ID_HEADER,
  REPLACES_HEADER,
  INBOX_SCOPE_HEADER,
  INBOX_FINGERPRINT_HEADER,
];
/** Most changes one audit lists. */
const MAX_CHANGES = 100;

/** The audit stored on a replaced row, or null when the text is missing or not one. */
export function parseEditAudit(text: string | null): DeadLetterEditAudit | null {
  if (!text) return null;
  try {
    const audit = JSON.parse(text) as DeadLetterEditAudit;
    return typeof audit === 'object' && audit !== null && typeof audit.replacedBy === 'string' ? audit : null;
  } catch {
    return null;
  }
}

/**
 * Replaces the dead rows of a message by a corrected copy (see `OutboxDeadLetters.editAndRequeue()`): checks the
 * option and the edit, reads the rows, then — in one transaction of the library's runner — makes each dead row the
 * copy in its place and keeps the original as a `replaced` row with the audit. Wakes the publisher.
 */
export async function editAndRequeue(
  database: OutboxDatabase,
  relays: OutboxRelayRegistry,
  allowEdit: boolean,
  messageId: string,
  edit: DeadLetterEdit,
): Promise<DeadLetterEditResult> {
  if (!allowEdit) {
    throw new OutboxEditDisabledError(
      `${CALL} is off: editing dead letters changes what a producer wrote, so it is opt-in. Set ` +
        '`deadLetters: { allowEdit: true }` in OutboxModule.forRoot() to allow it (every edit is audited).',
    );
  }
  const checked = checkEdit(messageId, edit);
  refuseInTransaction(database.dataSource, CALL, 'it runs in a transaction of its own');
  const { dataSource, dialect, table, entities } = database;
  const rows = await runOnConnection(dataSource, (m) =>
    m.getRepository(entities.message).find({ where: { messageId }, order: { seq: 'ASC' } }),
  );
  const ofDestination =
    checked.destination === undefined ? rows : rows.filter((r) => r.destination === checked.destination);
  if (ofDestination.length === 0) {
    throw new OutboxMessageNotFoundError(
      `The outbox has no message with id ${JSON.stringify(messageId)}` +
        (checked.destination === undefined ? '' : ` and destination ${JSON.stringify(checked.destination)}`) +
        ' (never written, purged or cleaned up). Pass the messageId of a listed dead letter.',
      messageId,
    );
  }
  const dead = ofDestination.filter((r) => r.status === 'dead');
  if (dead.length === 0) throw notDead(messageId, ofDestination);
  const original = dead[0];
  const before = { payload: parseJson(original.payload), ...headersOf(original.headers) };
  const payload = checked.payload ?? original.payload;
  const headers = checked.headers === undefined ? before.headers : withoutLibraryHeaders(checked.headers, original);
  const payloadChanges = jsonChanges(before.payload, parseJson(payload), MAX_CHANGES);
  const headerChanges = jsonChanges(before.headers, headers, MAX_CHANGES - payloadChanges.changes.length);
  const changes = [
    ...payloadChanges.changes.map((c) => ({ field: 'payload' as const, ...c })),
    ...headerChanges.changes.map((c) => ({ field: 'headers' as const, ...c })),
  ];
  if (changes.length === 0) {
    throw new OutboxEditInvalidError(
      `${CALL} was given nothing to change: the payload and headers are those of message ${JSON.stringify(messageId)}. ` +
        'Pass a corrected payload or headers, or requeue it unchanged with requeue().',
    );
  }
  const replacedBy = newMessageId();
  const destinations = dead.map((r) => r.destination);
  let audit: DeadLetterEditAudit | undefined;
  const replaced = await outsideTransactionContext(() =>
    runInTransaction(dataSource, (m) =>
      dialect.replaceDead(m, table, {
        messageId,
        seqs: dead.map((r) => r.seq),
        newMessageId: replacedBy,
        payload,
        headers: serializeJson({ ...headers, ...before.kept, [REPLACES_HEADER]: messageId }, 'headers', CALL),
        audit: (editedAt) => {
          audit = {
            replaces: messageId,
            replacedBy,
            destinations,
            editedAt,
            actor: checked.actor ?? null,
            reason: checked.reason === undefined ? null : redactSecrets(checked.reason),
            changes,
            truncated: payloadChanges.truncated || headerChanges.truncated,
          };
          return JSON.stringify(audit);
        },
      }),
    ),
  );
  if (replaced.length === 0 || !audit) {
    // A concurrent edit, requeue or purge changed the rows since they were read: nothing was written.
    const now = await runOnConnection(dataSource, (m) =>
      m.getRepository(entities.message).find({ where: { messageId }, order: { seq: 'ASC' } }),
    );
    throw notDead(messageId, now, dead.length);
  }
  const relay = relays.relay;
  if (relay.isWatched('requeued')) {
    relay.reportRequeued({
      requeued: replaced.length,
      patterns: [{ pattern: original.pattern, count: replaced.length }],
    });
  }
  relay.wake();
  return { messageId: replacedBy, replacedBy, audit };
}

/** The error for a message none of whose (selected) rows is dead now, naming its status and its copy if any. */
function notDead(messageId: string, rows: OutboxMessage[], expected?: number): OutboxNotDeadError {
  const replaced = rows.find((r) => r.status === 'replaced' && parseEditAudit(r.editAudit));
  const replacedBy = replaced ? parseEditAudit(replaced.editAudit)!.replacedBy : null;
  const status = replaced ? 'replaced' : (rows[0]?.status ?? null);
  const what =
    status === 'replaced'
      ? `was already replaced by ${JSON.stringify(replacedBy)} (edit that message instead, if it is dead)`
      : status === null
        ? 'is gone (purged meanwhile)'
        : expected !== undefined
          ? `changed while it was being edited (now ${status}): another edit, requeue or purge came first`
          : `is ${status === 'pending' ? 'pending (waiting or in flight)' : status}, not dead`;
  return new OutboxNotDeadError(
    `Message ${JSON.stringify(messageId)} ${what}. Only a dead letter can be edited; nothing was changed.`,
    messageId,
    status,
    replacedBy,
  );
}

/**
 * The edited headers without those the library writes: one passed back with its stored value (headers read with
 * `get()`) is dropped — the copy gets the library's own — and any other is refused.
 */
function withoutLibraryHeaders(headers: Record<string, string>, original: OutboxMessage): Record<string, string> {
  const stored = parseJson(original.headers ?? '{}') as Record<string, unknown>;
  const result: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (!LIBRARY_HEADERS.includes(lower)) result[name] = value;
    else if (typeof stored !== 'object' || stored === null || stored[lower] !== value) {
      throw new OutboxEditInvalidError(
        `${CALL}: header ${JSON.stringify(name)} is written by the library; leave it out. Nothing was changed.`,
      );
    }
  }
  return result;
}

interface CheckedEdit {
  payload?: string;
  headers?: Record<string, string>;
  reason?: string;
  actor?: string;
  destination?: string;
}

function checkEdit(messageId: unknown, edit: unknown): CheckedEdit {
  const invalid = (what: string) => new OutboxEditInvalidError(`${CALL}: ${what}. Nothing was changed.`);
  if (typeof messageId !== 'string' || messageId.length === 0 || messageId.length > 255) {
    throw invalid('the message id must be a non-empty string of at most 255 characters (a listed messageId)');
  }
  if (typeof edit !== 'object' || edit === null || Array.isArray(edit)) {
    throw invalid('the edit must be an object such as { payload, headers, reason, actor }');
  }
  const e = edit as Record<string, unknown>;
  const unknown = Object.keys(e).filter((k) => !EDIT_FIELDS.includes(k));
  if (unknown.length > 0) {
    throw invalid(
      `${unknown.map((k) => JSON.stringify(k)).join(', ')} cannot be edited: an edit takes ${EDIT_FIELDS.join(', ')} ` +
        '(the pattern, key and destination stay the original’s; emit a new message to change them)',
    );
  }
  const checked: CheckedEdit = {};
  if (e.payload !== undefined) {
    try {
      checked.payload = serializeJson(e.payload, 'payload', CALL);
    } catch (error) {
      if (error instanceof OutboxSerializationError) throw new OutboxEditInvalidError(error.message);
      throw error;
    }
  }
  if (e.headers !== undefined) checked.headers = checkHeaders(e.headers, invalid);
  checked.reason = optionalText(e.reason, 'reason', 1000, invalid);
  checked.actor = optionalText(e.actor, 'actor', 255, invalid);
  if (e.destination !== undefined && e.destination !== null) {
    if (typeof e.destination !== 'string' || e.destination.length > 255) {
      throw invalid("destination must be a row's destination: a string of at most 255 characters ('' included)");
    }
    checked.destination = e.destination;
  }
  if (checked.payload === undefined && checked.headers === undefined) {
    throw invalid('give a corrected payload or headers (or both)');
  }
  return checked;
}

function checkHeaders(value: unknown, invalid: (what: string) => Error): Record<string, string> {
  if (value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw invalid('headers must be an object of string values, or null for none');
  }
  for (const [name, v] of Object.entries(value as Record<string, unknown>)) {
    if (typeof v !== 'string') throw invalid(`header ${JSON.stringify(name)} must be a string, got ${typeof v}`);
  }
  return value as Record<string, string>;
}

function optionalText(value: unknown, name: string, max: number, invalid: (what: string) => Error): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value.trim().length === 0 || value.length > max) {
    throw invalid(`${name} must be a non-empty string of at most ${max} characters`);
  }
  return value;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * The stored headers as the map an edit changes, and those it keeps: a consumer's inbox headers (scope,
 * fingerprint), which the copy carries as they were. `x-outbox-replaces` is neither: every copy gets its own.
 */
function headersOf(text: string | null): { headers: Record<string, string>; kept: Record<string, string> } {
  const parsed = text === null ? {} : parseJson(text);
  const headers: Record<string, string> = {};
  const kept: Record<string, string> = {};
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return { headers, kept };
  for (const [name, value] of Object.entries(parsed as Record<string, string>)) {
    if (name === INBOX_SCOPE_HEADER || name === INBOX_FINGERPRINT_HEADER) kept[name] = value;
    else if (name !== REPLACES_HEADER) headers[name] = value;
  }
  return { headers, kept };
}
