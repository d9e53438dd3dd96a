import { OutboxHandlerInFlightError, OutboxNonRetryableError } from '../errors';

/** One destination of a message: its broker or one in-process handler. */
export interface DeliveryPart {
  /** `broker` or `handler`: decides which failure stands for the message when several parts fail. */
  kind: 'broker' | 'handler';
  run(): Promise<unknown>;
}

/**
 * Delivers a message to all of its destinations at once and resolves when every one succeeded (a handler that an
 * earlier attempt applied counts as success). When some fail, rejects with the failure that decides the message's
 * fate: a non-retryable one (dead at once), else a handler's (it counts toward `retry.maxAttempts`), else the
 * broker's or routing's (an unreachable broker gives its attempt back), else a handler found running elsewhere
 * (`OutboxHandlerInFlightError`: the attempt is given back).
 */
export async function deliverToAll(parts: readonly DeliveryPart[]): Promise<void> {
  const results = await Promise.allSettled(parts.map((part) => part.run()));
  const failed: Array<{ kind: DeliveryPart['kind']; error: unknown }> = [];
  results.forEach((result, i) => {
    if (result.status === 'rejected') failed.push({ kind: parts[i].kind, error: result.reason });
  });
  if (failed.length === 0) return;
  const inFlight = (f: { error: unknown }) => f.error instanceof OutboxHandlerInFlightError;
  const decisive =
    failed.find((f) => f.error instanceof OutboxNonRetryableError) ??
    failed.find((f) => f.kind === 'handler' && !inFlight(f)) ??
    failed.find((f) => f.kind === 'broker') ??
    failed[0];
  throw decisive.error;
}
