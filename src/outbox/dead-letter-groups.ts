import { createHash } from 'node:crypto';
import { OutboxDeadLetterQueryError } from '../errors';

/*
 * Failure groups: the cause of a dead message, read from its stored last error. Two errors are of one group when
 * they have the same error class, the same message once the parts that vary per message are replaced (numbers,
 * UUIDs, long ids, quoted values), and the same first application frame when the stored text has a stack. The
 * group id is a hash of those three, so it is stable across processes, restarts and databases.
 */

/** The cause of a dead message, as `failureGroupOf()` reads it from its last error. */
export interface FailureCause {
  /** The group id: 16 hex digits. */
  group: string;
  /** The error class (`OutboxPublishTimeoutError`), or `''` when the stored text names none. */
  errorClass: string;
  /** The message with its varying parts replaced: `<uuid>`, `<id>`, `<str>` (a quoted value), `<n>` (a number). */
  message: string;
  /** The first stack frame outside `node_modules` and Node's internals, or null when the text has no stack. */
  frame: string | null;
}

/** How a group id is spelled. */
export const GROUP_ID = /^[0-9a-f]{16}$/;

/** The longest normalised message kept (longer ones are cut, so a huge error text still groups). */
const MAX_MESSAGE = 300;

const STACK_LINE = /^\s+at\s+(.+)$/;
const CLASS_PREFIX = /^([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*):\s?/;

/** The message with the parts that vary per message replaced by placeholders, whitespace collapsed. */
export function normaliseMessage(message: string): string {
  const normalised = message
    .replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi, '<uuid>')
    .replace(/'[^'\n]*'|"[^"\n]*"|`[^`\n]*`/g, '<str>')
    // Long tokens of letters and digits with at least one digit: hex ids, ULIDs, base64url ids.
    .replace(/\b(?=[A-Za-z_-]*\d)[A-Za-z0-9_-]{16,}\b/g, '<id>')
    .replace(/\d+(?:\.\d+)?/g, '<n>')
    .replace(/\s+/g, ' ')
    .trim();
  return normalised.length > MAX_MESSAGE ? `${normalised.slice(0, MAX_MESSAGE)}…` : normalised;
}

/** The cause a stored last error names (null: no error stored). */
export function failureGroupOf(lastError: string | null): FailureCause {
  const lines = (lastError ?? '').split('\n');
  const stackStart = lines.findIndex((line) => STACK_LINE.test(line));
  const head = (stackStart === -1 ? lines : lines.slice(0, stackStart)).join(' ').trim();
  const match = CLASS_PREFIX.exec(head);
  const errorClass = match ? match[1] : '';
  const message = normaliseMessage(match ? head.slice(match[0].length) : head);
  let frame: string | null = null;
  if (stackStart !== -1) {
    for (const line of lines.slice(stackStart)) {
      const at = STACK_LINE.exec(line)?.[1].trim();
      if (!at || /node_modules|\(node:|^node:|\(internal\/|^internal\//.test(at)) continue;
      frame = at;
      break;
    }
  }
  const group = createHash('sha256')
    .update(`${errorClass}\0${message}\0${frame ?? ''}`)
    .digest('hex')
    .slice(0, 16);
  return { group, errorClass, message, frame };
}

/** A group id as a caller passes it; refuses anything `failureGroupOf()` cannot have made. */
export function checkGroupId(method: string, group: unknown): string {
  if (typeof group !== 'string' || !GROUP_ID.test(group)) {
    throw new OutboxDeadLetterQueryError(
      `OutboxDeadLetters.${method}(): group must be a group id (16 hex digits), got ${JSON.stringify(String(group))}. ` +
        'Pass the group of an entry of OutboxDeadLetters.groups().',
    );
  }
  return group;
}
