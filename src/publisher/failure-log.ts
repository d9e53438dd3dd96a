import type { LoggerService } from '@nestjs/common';
import type { ClaimedOutboxRow, OutboxFailure } from '../dialects/outbox-dialect';
import type { OutboxEventPayload, OutboxPublisherEvents } from '../events/publisher-events';
import { describeError } from '../util/describe-error';
import { type BatchOutcome, timeLeft } from './publish-pass';

/** While publishing keeps failing with the same error, one summary warning at most this often. */
const SAME_FAILURE_LOG_INTERVAL_MS = 30_000;
/** Whatever the errors, never more than one publish-failure warning this often (a flapping broker stays quiet). */
const MIN_FAILURE_LOG_INTERVAL_MS = 5_000;
/** While passes keep failing (database unreachable, …), one error line at most this often. */
const PASS_FAILURE_LOG_INTERVAL_MS = 60_000;

/** Failed publish attempts (retried ones) not yet reported in a warning. */
interface UnreportedFailures {
  attempts: number;
  batches: number;
  firstError: string;
  minDelay: number;
  maxDelay: number;
}

/** Sends a publisher event (to listeners and the diagnostics channel). */
type EmitEvent = <E extends keyof OutboxPublisherEvents>(event: E, payload: OutboxEventPayload<E>) => void;

/** The error type and duration of a failed attempt, for its event (left out when unknown). */
function timing({ errorType, durationMs }: OutboxFailure): { errorType?: string; publishDurationMs?: number } {
  return {
    ...(errorType === undefined ? {} : { errorType }),
    ...(durationMs === undefined ? {} : { publishDurationMs: durationMs }),
  };
}

/**
 * What the publisher tells the operator when things go wrong, kept bounded: dead messages and lost leases one by
 * one, retried publish failures summed up per episode (a broker outage fails every message of the backlog, again at
 * every retry), failing passes at most once a minute, and one line when an episode ends.
 */
export class PublishFailureLog {
  /** Failing passes: since when, and when the last error line went out. */
  private failingSince?: number;
  private lastFailureLog = 0;
  /** Publish failures (broker unreachable, timeouts): start of the current episode and what is still unreported. */
  private publishFailingSince?: number;
  private publishFailuresInEpisode = 0;
  private publishEpisodeWarned = false;
  private lastPublishWarnAt = 0;
  private lastPublishWarnError?: string;
  private unreported?: UnreportedFailures;

  constructor(
    private readonly logger: LoggerService,
    private readonly emit: EmitEvent,
  ) {}

  /** A message that failed: dead (logged as an error, `dead` event) or retried (debug line, `retry` event). */
  messageFailed(row: ClaimedOutboxRow, failure: OutboxFailure): void {
    if (failure.dead) {
      this.logger.error(
        `Outbox message ${row.messageId} ('${row.pattern}'${forDestination(row)}) is dead after ${row.attempts} ` +
          `attempt(s): ${failure.error}. List, requeue or purge it with OutboxDeadLetters.`,
      );
      const { messageId, pattern, key, destination, attempts } = row;
      this.emit('dead', { messageId, pattern, key, destination, attempts, error: failure.error, ...timing(failure) });
    } else {
      // Per message at debug only: a broker outage fails every message of the backlog, again at every retry.
      // batchCompleted() writes the bounded summary.
      const attempts = failure.transportUnreachable ? row.attempts - 1 : row.attempts;
      const uncounted = `not counted as an attempt; ${attempts} counted so far`;
      const what =
        failure.errorType === 'OutboxCircuitOpenError'
          ? `was not sent, its broker's circuit breaker being open (${uncounted})`
          : failure.transportUnreachable
            ? `could not reach the broker (${uncounted})`
            : `failed attempt ${attempts}`;
      this.logger.debug?.(
        `Outbox message ${row.messageId} ('${row.pattern}'${forDestination(row)}) ${what}, ` +
          `retrying in ${failure.retryDelay} ms: ${failure.error}`,
      );
      this.emit('retry', {
        messageId: row.messageId,
        pattern: row.pattern,
        destination: row.destination,
        attempts,
        retryDelay: failure.retryDelay,
        error: failure.error,
        transportUnreachable: failure.transportUnreachable === true,
        ...timing(failure),
      });
    }
  }

  /**
   * Sums up a batch's retried failures: a warning with their count and first error goes out when an episode starts,
   * and after that at most every 30 s while the same error persists (every 5 s at most when it changes). A batch
   * published without a failure ends the episode with one recovery line (if a warning went out).
   */
  batchCompleted(outcome: BatchOutcome): void {
    const retried = outcome.failures.filter((f) => !f.failure.dead);
    const now = Date.now();
    if (retried.length === 0) {
      if (outcome.sent.length > 0 && this.publishFailingSince !== undefined) this.publishRecovered(now);
      return;
    }
    this.publishFailingSince ??= now;
    this.publishFailuresInEpisode += retried.length;
    const delays = retried.map((f) => f.failure.retryDelay);
    const firstError = retried[0].failure.error;
    const pending = (this.unreported ??= { attempts: 0, batches: 0, firstError, minDelay: Infinity, maxDelay: 0 });
    pending.attempts += retried.length;
    pending.batches += 1;
    pending.minDelay = Math.min(pending.minDelay, ...delays);
    pending.maxDelay = Math.max(pending.maxDelay, ...delays);
    const error = pending.firstError;
    const since = now - this.lastPublishWarnAt;
    const interval = error === this.lastPublishWarnError ? SAME_FAILURE_LOG_INTERVAL_MS : MIN_FAILURE_LOG_INTERVAL_MS;
    if (since < interval) return;
    const delay =
      pending.minDelay === pending.maxDelay ? `${pending.minDelay} ms` : `${pending.minDelay}–${pending.maxDelay} ms`;
    this.logger.warn(
      `Outbox publishing is failing: ${pending.attempts} attempt(s) in ${pending.batches} batch(es) failed ` +
        `${this.publishEpisodeWarned ? 'since the last report' : 'just now'} and will be retried in ${delay} ` +
        `(with backoff); first error: ${error}. Failing for ${now - this.publishFailingSince} ms. Nothing is lost: ` +
        'messages stay pending until the broker confirms them. Check the broker and the client options; ' +
        'per-message detail is logged at debug level.',
    );
    this.unreported = undefined;
    this.lastPublishWarnAt = now;
    this.lastPublishWarnError = error;
    this.publishEpisodeWarned = true;
  }

  /** A row not published because it expired: one warning and an `expired` event. */
  messageExpired(row: ClaimedOutboxRow, outcome: 'dead' | 'drop'): void {
    const { messageId, pattern, key, destination } = row;
    this.logger.warn(
      `Outbox message ${messageId} ('${pattern}') expired before it could be published; it was not sent and ` +
        (outcome === 'dead' ? 'is now a dead letter (reason: expired).' : 'was dropped (publisher.onExpired).'),
    );
    const expiredForMs = Math.max(0, -Math.floor(timeLeft(row) ?? 0));
    this.emit('expired', { messageId, pattern, key, destination, outcome, expiredForMs });
  }

  /** Rows whose completion write was refused because another publisher took the claim over. */
  leaseLost(owner: string, rows: ClaimedOutboxRow[], lost: number): void {
    this.logger.error(
      `Lost the lease on ${lost} of ${rows.length} claimed outbox messages before marking them: another publisher ` +
        'took them over, so they may be published twice (consumers deduplicate by message id). ' +
        'Raise publisher.leaseDuration or lower publisher.publishTimeout, and check for event-loop stalls.',
    );
    this.emit('leaseLost', { owner, lost, messageIds: rows.map((r) => r.messageId) });
  }

  /** A failing pass (database unreachable, …): logged at most once a minute while it keeps failing. */
  passFailed(error: unknown): void {
    const now = Date.now();
    this.failingSince ??= now;
    if (now - this.lastFailureLog >= PASS_FAILURE_LOG_INTERVAL_MS) {
      this.lastFailureLog = now;
      this.logger.error(`Outbox publish pass failed (will retry on the next poll): ${describeError(error)}`);
    }
  }

  /** A pass that claimed without error: ends a failing episode with one line. */
  passSucceeded(): void {
    if (this.failingSince !== undefined) {
      this.logger.log(`Outbox publisher recovered after ${Date.now() - this.failingSince} ms of failing passes`);
      this.failingSince = undefined;
      this.lastFailureLog = 0;
    }
  }

  private publishRecovered(now: number): void {
    // An episode too short to have been warned about stays silent; its failures go into the next warning.
    if (this.publishEpisodeWarned) {
      const unreported = this.unreported ? ` (${this.unreported.attempts} of them since the last warning)` : '';
      this.logger.log(
        `Outbox publishing recovered after ${now - this.publishFailingSince!} ms: ` +
          `${this.publishFailuresInEpisode} failed attempt(s) in between${unreported}, each retried.`,
      );
      this.unreported = undefined;
    }
    this.publishFailingSince = undefined;
    this.publishFailuresInEpisode = 0;
    this.publishEpisodeWarned = false;
  }
}

/** `, for <destination>` of a row written for one destination; nothing for a row of every destination. */
function forDestination(row: ClaimedOutboxRow): string {
  return row.destination ? `, for ${row.destination}` : '';
}
