import { OutboxHandlerFailedError, OutboxHandlerInFlightError } from '../errors';

/**
 * How many leases a handler run may go on holding a message's record, counted from when a publisher first found it
 * held, before that publisher stops giving the attempts back (the run started at least a lease before that).
 */
export const IN_FLIGHT_GRACE_LEASES = 2;

/**
 * Bounds the attempts a publisher gives back because an in-process handler's record is held by another transaction
 * (`OutboxHandlerInFlightError`). Such a record is held only while the run holding it is alive (the lock is
 * transaction- or session-scoped: a crash frees it), so a run that outlived its lease is given time to commit; but a
 * run that hangs (an awaited call that never returns) would otherwise have every retry given back, the message
 * never sent nor dead and its key held back for good. So each message's first in-flight find is remembered, and once
 * `grace` ms have passed since, a find counts toward `retry.maxAttempts` like a handler failure. A message not found
 * in flight for `grace` ms is forgotten (another publisher delivered it, or the run ended).
 */
export class InFlightGiveBacks {
  private readonly seen = new Map<string, { first: number; last: number }>();

  constructor(
    private readonly grace: number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * The error a message's failed delivery stands for: `error` itself, except an `OutboxHandlerInFlightError` of a
   * record held for `grace` ms or more since this publisher first found it held, which becomes an
   * `OutboxHandlerFailedError` (counted) naming how long and what to fix. Any other error ends the message's
   * in-flight episode.
   */
  judge(messageId: string, error: unknown): unknown {
    const now = this.now();
    for (const [id, entry] of this.seen) if (now - entry.last > this.grace) this.seen.delete(id);
    if (!(error instanceof OutboxHandlerInFlightError)) {
      this.seen.delete(messageId);
      return error;
    }
    const entry = this.seen.get(messageId) ?? { first: now, last: now };
    entry.last = now;
    this.seen.set(messageId, entry);
    const heldFor = now - entry.first;
    if (heldFor < this.grace) return error;
    return new OutboxHandlerFailedError(
      `${error.message} Still held ${Math.round(heldFor / 1000)} s after this publisher first found it ` +
        `(${IN_FLIGHT_GRACE_LEASES} × publisher.leaseDuration), so the attempt counts toward retry.maxAttempts: ` +
        'a handler that never returns holds its record and a pooled connection; give what it awaits a timeout.',
      error,
    );
  }

  /** Messages remembered (for tests). */
  get size(): number {
    return this.seen.size;
  }
}
