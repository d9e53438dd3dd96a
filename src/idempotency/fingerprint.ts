import { sha256Hex } from '../util/sha256';
import { JsonNestingTooDeepError, MAX_JSON_DEPTH, stableJson } from './stable-json';

/**
 * SHA-256 (hex, 64 characters) of the stable JSON of `parts`: independent of the key order of any object in it.
 * Throws `JsonNestingTooDeepError` when a part is nested more than `MAX_JSON_DEPTH` levels deep.
 */
export function fingerprintOf(...parts: unknown[]): string {
  let text: string;
  try {
    // + 1: the array of parts itself.
    text = stableJson(parts, MAX_JSON_DEPTH + 1);
  } catch (error) {
    throw error instanceof JsonNestingTooDeepError ? new JsonNestingTooDeepError(MAX_JSON_DEPTH) : error;
  }
  return sha256Hex(text);
}
