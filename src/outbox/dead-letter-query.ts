import type { DeadRowFilter, DeadRowPosition } from '../dialects/outbox-dialect';
import { OutboxDeadLetterQueryError } from '../errors';
import type { DeadLetterFilter, DeadLetterTime } from './dead-letter.model';

/*
 * Checking what a caller (or a console's query string) passes to `OutboxDeadLetters`, and the opaque cursor of its
 * pages. Every mistake is an `OutboxDeadLetterQueryError` naming the field and the fix, raised before any SQL.
 */

const FILTER_FIELDS = [
  'messageIds',
  'pattern',
  'key',
  'destination',
  'errorContains',
  'deadSince',
  'deadBefore',
  'createdSince',
  'createdBefore',
] as const;
const TIME_FIELDS = ['deadSince', 'deadBefore', 'createdSince', 'createdBefore'] as const;
const TEXT_FIELDS = ['pattern', 'key', 'destination', 'errorContains'] as const;

/** How a filter names the destination `''` (every destination of the message), which a query string cannot carry. */
export const ALL_DESTINATIONS_FILTER = '*';

/** Most message ids in one filter. */
export const MAX_FILTER_IDS = 1000;

function refuse(method: string, problem: string, fix: string): never {
  throw new OutboxDeadLetterQueryError(`OutboxDeadLetters.${method}(): ${problem}. ${fix}`);
}

/** Validates a filter (only its own fields, or also `extra` ones the method reads itself) and normalizes it. */
export function checkFilter(method: string, raw: unknown, extra: readonly string[] = []): DeadRowFilter {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    refuse(method, `the filter must be an object, got ${typeof raw}`, `Pass e.g. { pattern: 'OrderPlaced' }.`);
  }
  const input = raw as Record<string, unknown>;
  const unknown = Object.keys(input).filter(
    (k) => !(FILTER_FIELDS as readonly string[]).includes(k) && !extra.includes(k),
  );
  if (unknown.length > 0) {
    refuse(
      method,
      `unknown filter field ${unknown.join(', ')}`,
      `Use only ${[...FILTER_FIELDS, ...extra].join(', ')}.`,
    );
  }
  const filter: DeadRowFilter = {};
  for (const field of TEXT_FIELDS) {
    const value = input[field];
    if (value === undefined) continue;
    if (typeof value !== 'string' || value.length === 0 || value.length > 255) {
      refuse(method, `${field} must be a non-empty string of at most 255 characters`, `Leave it out to match any.`);
    }
    filter[field] = field === 'destination' && value === ALL_DESTINATIONS_FILTER ? '' : value;
  }
  if (input.messageIds !== undefined) filter.messageIds = checkIds(method, input.messageIds);
  for (const field of TIME_FIELDS) {
    if (input[field] !== undefined) filter[field] = toEpochMs(method, field, input[field]);
  }
  return filter;
}

/** A list of message ids: non-empty strings, at most `MAX_FILTER_IDS`. */
export function checkIds(method: string, ids: unknown): string[] {
  if (!Array.isArray(ids) || ids.some((id) => typeof id !== 'string' || id.length === 0)) {
    refuse(
      method,
      'takes an array of message ids (non-empty strings), a filter object, or nothing for all dead messages',
      `Pass e.g. ['0193…'] or { pattern: 'OrderPlaced' }.`,
    );
  }
  if (ids.length > MAX_FILTER_IDS) {
    refuse(method, `${ids.length} message ids is more than ${MAX_FILTER_IDS}`, 'Split the list, or use a filter.');
  }
  return ids as string[];
}

/** A time as epoch milliseconds: a number, a Date, an ISO 8601 string or a string of digits. */
function toEpochMs(method: string, field: string, value: unknown): number {
  let ms: number = NaN;
  if (typeof value === 'number') ms = value;
  else if (value instanceof Date) ms = value.getTime();
  else if (typeof value === 'string') ms = /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isSafeInteger(ms) || ms < 0) {
    refuse(
      method,
      `${field} must be epoch milliseconds (a non-negative integer), a Date or an ISO 8601 string, got ${JSON.stringify(String(value))}`,
      `Pass e.g. ${Date.UTC(2026, 0, 1)} or '2026-01-01T00:00:00Z'.`,
    );
  }
  return ms;
}

/** The page size: an integer from 1 to 1000. */
export function checkLimit(method: string, limit: unknown, fallback: number): number {
  if (limit === undefined) return fallback;
  const n = typeof limit === 'string' && /^\d+$/.test(limit) ? Number(limit) : limit;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 1000) {
    refuse(
      method,
      `limit must be an integer from 1 to 1000, got ${JSON.stringify(limit)}`,
      `Leave it out for ${fallback}.`,
    );
  }
  return n;
}

const CURSOR_VERSION = 'd1';

/** The opaque cursor of a position in the newest-first order. */
export function encodeCursor(position: DeadRowPosition): string {
  return Buffer.from(`${CURSOR_VERSION}:${position.deadAt}:${position.seq}`, 'utf8').toString('base64url');
}

/** The position a cursor stands for; refuses anything `encodeCursor()` did not make. */
export function decodeCursor(method: string, cursor: unknown): DeadRowPosition | undefined {
  if (cursor === undefined || cursor === null || cursor === '') return undefined;
  const text = typeof cursor === 'string' ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const match = /^d1:(\d{1,16}):(\d{1,20})$/.exec(text);
  if (!match || !Number.isSafeInteger(Number(match[1]))) {
    refuse(
      method,
      'the cursor is not one this API returned',
      'Pass the nextCursor of the previous page, or none for the first.',
    );
  }
  return { deadAt: Number(match[1]), seq: match[2] };
}

/** Re-exported for the service's signatures. */
export type { DeadLetterFilter, DeadLetterTime };
