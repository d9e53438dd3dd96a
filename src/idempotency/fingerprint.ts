import { createHash } from 'node:crypto';
import { stableJson } from './stable-json';

/** SHA-256 (hex, 64 characters) of the stable JSON of `parts`: independent of the key order of any object in it. */
export function fingerprintOf(...parts: unknown[]): string {
  return createHash('sha256').update(stableJson(parts)).digest('hex');
}
