import { randomUUID } from 'node:crypto';
import type { AttemptHistoryOptions, ClaimedOutboxRow, OutboxFailure } from '../dialects/outbox-dialect';
import type { OutboxDatabase } from '../dialects/outbox-database';
import { OutboxMessageExpiredError, OutboxPublishTimeoutError } from '../errors';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { isFinalFailure, retryMessageOf } from '../util/retry-policy';
import type { ResolvedRetryPolicy } from '../retry.options';
import { runOnConnection } from '../transaction/transaction-runner';
import type { OutgoingOutboxMessage } from '../transports/outbox-transport';
import { isTransportUnreachable } from '../transports/transport-unreachable';
import { describeFailure } from '../util/describe-error';
import { errorTypeOf } from '../util/error-type';
import { retryDelay } from './backoff';

/*
 * The steps of one publish pass — claim, publish, fenced completion — as plain functions over the database and the
 * client (publishing a whole batch, in key order, is in publish-batch.ts). `OutboxPublisher` strings them together
 * in its `protected` steps, which subclasses may override.
 */

/** Outcome of one publish pass. */
export interface OutboxPassResult {
  claimed: number;
  published: number;
  failed: number;
  /** Rows whose claim was taken over by another publisher before this one could mark them (lease lost). */
  fenced: number;
  /** Claimed rows released unstarted (shutdown, a failed earlier message of their key, or too little lease left). */
  released: number;
}

/** What happened to the rows of one claimed batch. */
export interface BatchOutcome {
  sent: ClaimedOutboxRow[];
  failures: Array<{ row: ClaimedOutboxRow; failure: OutboxFailure }>;
  unstarted: ClaimedOutboxRow[];
  /** Rows not published because their expiry had passed (see `timeLeft()`): marked dead or deleted. */
  expired?: ClaimedOutboxRow[];
  /**
   * Per sent row (by `seq`): how long its publish took until the broker confirmed it (ms) and when it was confirmed
   * (`performance.now()`). Filled by `OutboxPublisher.publishBatch()`; read for the `published` event.
   */
  timings?: Map<string, { durationMs: number; confirmedAt: number }>;
}

/** A batch claimed under one owner token. */
export interface ClaimedBatch {
  owner: string;
  rows: ClaimedOutboxRow[];
  /** Local time by which the lease has surely ended (a conservative bound of the database's lease end). */
  leaseDeadline: number;
}

/** Margin kept between the end of the longest possible publish and the end of the lease. */
export const LEASE_SAFETY_MS = 500;

/** The pass result of a pass that found nothing due. */
export const EMPTY_PASS: Readonly<OutboxPassResult> = Object.freeze({
  claimed: 0,
  published: 0,
  failed: 0,
  fenced: 0,
  released: 0,
});

/** Claims up to `batchSize` due rows under a new owner token, with a lease of `leaseDuration` on the database clock. */
export async function claimDueRows(
  database: OutboxDatabase,
  { batchSize, leaseDuration }: ResolvedOutboxOptions['publisher'],
  walHandoffMs?: number,
): Promise<ClaimedBatch | undefined> {
  const { dataSource, dialect, table } = database;
  const owner = randomUUID();
  // The lease ends `leaseDuration` after the database evaluated the claim, which is after this instant.
  const leaseDeadline = Date.now() + leaseDuration;
  const rows = await runOnConnection(dataSource, (m) =>
    dialect.claim(m, { table, owner, limit: batchSize, leaseMs: leaseDuration, walHandoffMs }),
  );
  const claimedAt = performance.now();
  for (const row of rows) row.claimedAt = claimedAt;
  return rows.length === 0 ? undefined : { owner, rows, leaseDeadline };
}

/**
 * Milliseconds a claimed row has left before it expires: its time left at the claim (database clock) less the
 * time this process took since. `undefined` for a row without expiry; 0 or less once expired.
 */
export function timeLeft(row: ClaimedOutboxRow): number | undefined {
  if (row.expiresInMs === undefined) return undefined;
  return row.expiresInMs - (row.claimedAt === undefined ? 0 : performance.now() - row.claimedAt);
}

/** The message a claimed row carries, as the transport builds its record from it. */
export function outgoingMessage(row: ClaimedOutboxRow): OutgoingOutboxMessage {
  const left = timeLeft(row);
  return {
    messageId: row.messageId,
    pattern: row.pattern,
    payload: JSON.parse(row.payload),
    headers: row.headers ? JSON.parse(row.headers) : {},
    key: row.key,
    ...(left === undefined ? {} : { expiresInMs: Math.max(1, Math.floor(left)) }),
  };
}

/** The last error of a message dead because it expired before it could be published. */
export function expiredError(row: ClaimedOutboxRow): string {
  const expiredAt = new Date(Date.now() + Math.min(0, timeLeft(row) ?? 0)).toISOString();
  const error = new OutboxMessageExpiredError(
    `expired at ${expiredAt} before it could be published (emit()'s expiresIn / expiresAt); it was not sent. ` +
      'Requeueing it does not help (it expires again at once): emit it again with a later expiry if it is still wanted.',
  );
  return `${error.name}: ${error.message}`;
}

/**
 * What a failed publish means for its row. A broker that could not be reached, and a confirm that never came
 * (`OutboxPublishTimeoutError`: an unknown outcome, not the message's fault), give the attempt back and wait with
 * backoff growing with `unreachableStreak` (capped at `retry.maxDelay`): slowness alone never makes a message dead.
 * Any other failure counts toward `retry.maxAttempts` (`OutboxNonRetryableError`, or `retryIf` answering false:
 * dead at once). `retry` is the row's policy (its pattern's, see `policyFor()`). The error text is redacted of
 * credentials. `connected` is the client's reported connection state, `undefined` when it reports none.
 */
export function failureOf(
  row: ClaimedOutboxRow,
  error: unknown,
  retry: ResolvedRetryPolicy,
  { connected, unreachableStreak }: { connected: boolean | undefined; unreachableStreak: number },
): OutboxFailure {
  const text = describeFailure(error);
  const errorType = errorTypeOf(error);
  if (error instanceof OutboxPublishTimeoutError || isTransportUnreachable(error, { connected })) {
    const delay = retryDelay(unreachableStreak + 1, retry);
    return { seq: row.seq, error: text, dead: false, retryDelay: delay, transportUnreachable: true, errorType };
  }
  const dead = isFinalFailure(retry, error, row.attempts, () => retryMessageOf(row));
  return { seq: row.seq, error: text, dead, retryDelay: dead ? 0 : retryDelay(row.attempts, retry), errorType };
}

/**
 * The `published` event's entry of a sent row: its publish duration, and its commit-to-publish delay — its age at
 * claim on the database clock plus what this process took from the claim to the confirmation.
 */
export function publishedEntry(row: ClaimedOutboxRow, timing: { durationMs: number; confirmedAt: number } | undefined) {
  const { messageId, pattern, key, attempts, destination } = row;
  if (!timing) return { messageId, pattern, key, attempts, destination };
  const delayMs =
    row.ageMs === undefined || row.claimedAt === undefined
      ? undefined
      : row.ageMs + Math.max(0, timing.confirmedAt - row.claimedAt);
  const publishDurationMs = timing.durationMs;
  const measured = { publishDurationMs, ...(delayMs === undefined ? {} : { delayMs }) };
  return { messageId, pattern, key, attempts, destination, ...measured };
}

/** Rows each completion statement changed, and how many it could not because the claim was lost (`fenced`). */
export interface CompletionCounts {
  marked: number;
  rescheduled: number;
  released: number;
  fenced: number;
}

/**
 * Writes a batch's outcome back, every statement fenced by the claim's owner token: sent rows marked (or deleted,
 * with `deleteOnPublish`), failures rescheduled or marked dead (with their attempt history, when `history` is
 * given), expired rows marked dead with `OutboxMessageExpiredError` (or deleted, `onExpired: 'drop'`), unstarted
 * rows released.
 */
export async function writeOutcome(
  database: OutboxDatabase,
  owner: string,
  outcome: BatchOutcome,
  deleteOnPublish: boolean,
  history?: AttemptHistoryOptions,
  onExpired: 'dead' | 'drop' = 'dead',
): Promise<CompletionCounts> {
  const { dataSource, dialect, table } = database;
  const expired = outcome.expired ?? [];
  const dropped = onExpired === 'drop' ? expired.map((r) => r.seq) : [];
  const sentSeqs = outcome.sent.map((r) => r.seq);
  const failures = outcome.failures.map((f) => f.failure);
  if (onExpired === 'dead') {
    for (const row of expired) {
      failures.push({ seq: row.seq, error: expiredError(row), dead: true, retryDelay: 0 });
    }
  }
  const deleted =
    dropped.length === 0 ? 0 : await runOnConnection(dataSource, (m) => dialect.deleteSent(m, table, owner, dropped));
  const marked = await runOnConnection(dataSource, (m) =>
    deleteOnPublish ? dialect.deleteSent(m, table, owner, sentSeqs) : dialect.markSent(m, table, owner, sentSeqs),
  );
  const rescheduled = await runOnConnection(dataSource, (m) => dialect.markFailed(m, table, owner, failures, history));
  const released = await runOnConnection(dataSource, (m) =>
    dialect.release(
      m,
      table,
      owner,
      outcome.unstarted.map((r) => r.seq),
    ),
  );
  const fenced =
    sentSeqs.length -
    marked +
    (failures.length - rescheduled) +
    (dropped.length - deleted) +
    (outcome.unstarted.length - released);
  return { marked, rescheduled, released, fenced };
}
