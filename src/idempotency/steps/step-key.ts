import { createHash } from 'node:crypto';

/**
 * The step key handed to a step's callback: SHA-256 (64 hex characters) of the call's scope, key, fingerprint and
 * the step's name. The same for every retry of the same request, different for another step, another key, another
 * principal or another request sent with a reused key. Pass it to the external system as its own idempotency key,
 * so that a call that succeeded but whose result was never recorded is not done twice there.
 */
export function stepKeyOf(scope: string, key: string, fingerprint: string, step: string): string {
  return createHash('sha256').update(`step\u0000${scope}\u0000${key}\u0000${fingerprint}\u0000${step}`).digest('hex');
}
