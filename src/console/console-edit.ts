import { principalOf } from '../idempotency/http-request';
import type { DeadLetterEdit, DeadLetterEditResult } from '../outbox/dead-letter-edit.types';
import type { OutboxDeadLetters } from '../outbox/outbox-dead-letters.service';
import { REDACTED, redactSecrets } from '../util/redact-secrets';
import { badRequest, ConsoleProblem, notFound } from './console-problem';

/** The body of `POST <path>/api/edit`: which message, and the corrected payload and headers as the JSON text typed. */
interface EditBody {
  id: string;
  destination?: string;
  payload?: string;
  headers?: string;
  reason?: string;
}

const FIELDS = ['id', 'destination', 'payload', 'headers', 'reason'];

/**
 * `POST <path>/api/edit`: edit-and-requeue one dead letter (`OutboxDeadLetters.editAndRequeue()`), refused with 403
 * unless the outbox allows it. The operator edits what the console showed — redacted — so a value still shown as
 * redacted (`***`, or a URL whose user-info reads `***`) where the stored message has one keeps the stored value:
 * a credential the operator never saw is not overwritten with `***`. The actor is the guard's principal
 * (`request.user.id`, else `sub`), or `console` when the guard sets none.
 */
export async function editFromConsole(
  deadLetters: OutboxDeadLetters,
  outbox: string,
  body: unknown,
  request: unknown,
): Promise<DeadLetterEditResult> {
  if (!deadLetters.editAllowed) {
    throw new ConsoleProblem(
      403,
      'Editing is off',
      `The outbox '${outbox}' does not allow editing dead letters. Set deadLetters: { allowEdit: true } in its ` +
        'OutboxModule.forRoot() to allow it (every edit is audited).',
      'edit-disabled',
    );
  }
  const edit = readEditBody(body);
  const stored = await deadLetters.get(edit.id, edit.destination);
  if (!stored) throw notFound(`The outbox '${outbox}' has no message with id ${JSON.stringify(edit.id)}.`);
  const change: DeadLetterEdit = { actor: principalOf(request) ?? 'console' };
  if (edit.destination !== undefined) change.destination = edit.destination;
  if (edit.reason !== undefined && edit.reason.trim() !== '') change.reason = edit.reason;
  if (edit.payload !== undefined) {
    change.payload = keepHidden(parseJsonText(edit.payload, 'payload'), parseStored(stored.payload));
  }
  if (edit.headers !== undefined) {
    const headers = keepHidden(parseJsonText(edit.headers, 'headers'), parseStored(stored.headers ?? '{}'));
    change.headers = headers === null ? null : (headers as Record<string, string>);
  }
  return deadLetters.editAndRequeue(edit.id, change);
}

function readEditBody(body: unknown): EditBody {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw badRequest('The body must be a JSON object: { "id": "…", "payload": "<JSON text>", "reason": "…" }.');
  }
  const b = body as Record<string, unknown>;
  const extra = Object.keys(b).filter((k) => !FIELDS.includes(k));
  if (extra.length > 0) throw badRequest(`Unknown body field ${extra.join(', ')}: send ${FIELDS.join(', ')}.`);
  for (const name of FIELDS) {
    if (b[name] !== undefined && typeof b[name] !== 'string') throw badRequest(`"${name}" must be a string.`);
  }
  if (typeof b.id !== 'string' || b.id === '') throw badRequest('"id" must be the message id of a dead letter.');
  return b as unknown as EditBody;
}

function parseJsonText(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw badRequest(`The ${what} is not valid JSON (${(error as Error).message}). Fix it and send it again.`);
  }
}

function parseStored(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * `edited` with every string that is still the redacted form of the stored value at the same place replaced by the
 * stored value: `***` where something is stored, or `redactSecrets(stored)` when that differs from it.
 */
export function keepHidden(edited: unknown, stored: unknown): unknown {
  if (typeof edited === 'string') {
    if (stored === undefined) return edited;
    if (edited === REDACTED) return stored;
    if (typeof stored === 'string' && stored !== edited && redactSecrets(stored) === edited) return stored;
    return edited;
  }
  if (Array.isArray(edited)) {
    return edited.map((v, i) => keepHidden(v, Array.isArray(stored) ? stored[i] : undefined));
  }
  if (typeof edited === 'object' && edited !== null) {
    const from = typeof stored === 'object' && stored !== null && !Array.isArray(stored) ? stored : {};
    return Object.fromEntries(
      Object.entries(edited).map(([k, v]) => [k, keepHidden(v, (from as Record<string, unknown>)[k])]),
    );
  }
  return edited;
}
