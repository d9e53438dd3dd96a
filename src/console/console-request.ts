import type { DeadLetterFilter } from '../outbox/dead-letter.model';
import { badRequest } from './console-problem';

/** What a POST requeue / purge / dry-run selects: message ids, or every dead message a filter matches (`{}`: all). */
export type ConsoleSelection = { ids: string[] } | { filter: DeadLetterFilter };

/**
 * Reads the body of `POST <path>/api/requeue`, `/purge` and `/dry-run`: exactly one of `ids` (a non-empty array) or `filter`
 * (an object; `{}` selects every dead message, on purpose). The fields inside are checked by `OutboxDeadLetters`.
 */
export function readSelection(body: unknown): ConsoleSelection {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw badRequest('The body must be a JSON object: { "ids": ["…"] } or { "filter": { "pattern": "…" } }.');
  }
  const { ids, filter, ...rest } = body as Record<string, unknown>;
  const extra = Object.keys(rest);
  if (extra.length > 0) throw badRequest(`Unknown body field ${extra.join(', ')}: send only "ids" or "filter".`);
  if ((ids === undefined) === (filter === undefined)) {
    throw badRequest('Send exactly one of "ids" (message ids) or "filter" (a dead-letter filter; {} for all).');
  }
  if (ids !== undefined) {
    if (!Array.isArray(ids) || ids.length === 0) throw badRequest('"ids" must be a non-empty array of message ids.');
    return { ids: ids as string[] };
  }
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) {
    throw badRequest('"filter" must be an object such as { "pattern": "OrderPlaced" } ({} for every dead message).');
  }
  return { filter: filter as DeadLetterFilter };
}

/** Reads `minutes` of `GET <path>/api/series`: an integer from 1 to `window`, default `window`. */
export function readMinutes(raw: unknown, window: number): number {
  if (raw === undefined) return window;
  const n = typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > window) {
    throw badRequest(`"minutes" must be an integer from 1 to ${window} (the console keeps ${window} minutes).`);
  }
  return n;
}
