import { randomUUID } from 'node:crypto';
import type { AttemptHistoryOptions, ClaimedOutboxRow, OutboxFailure } from '../dialects/outbox-dialect';
import type { OutboxDatabase } from '../dialects/outbox-database';
import { OutboxNonRetryableError, OutboxPublishTimeoutError } from '../errors';
import type { ResolvedOutboxOptions } from '../outbox.options';
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
): Promise<ClaimedBatch | undefined> {
  const { dataSource, dialect, table } = database;
  const owner = randomUUID();
  // The lease ends `leaseDuration` after the database evaluated the claim, which is after this instant.
  const leaseDeadline = Date.now() + leaseDuration;
  const rows = await runOnConnection(dataSource, (m) =>
    dialect.claim(m, { table, owner, limit: batchSize, leaseMs: leaseDuration }),
  );
  const claimedAt = performance.now();
  for (const row of rows) row.claimedAt = claimedAt;
  return rows.length === 0 ? undefined : { owner, rows, leaseDeadline };
}

/** The message a claimed row carries, as the transport builds its record from it. */
export function outgoingMessage(row: ClaimedOutboxRow): OutgoingOutboxMessage {
  return {
    messageId: row.messageId,
    pattern: row.pattern,
    payload: JSON.parse(row.payload),
    headers: row.headers ? JSON.parse(row.headers) : {},
    key: row.key,
  };
}

/**
 * What a failed publish means for its row. A broker that could not be reached, and a confirm that never came
 * (`OutboxPublishTimeoutError`: an unknown outcome, not the message's fault), give the attempt back and wait with
 * backoff growing with `unreachableStreak` (capped at `retry.maxDelay`): slowness alone never makes a message dead.
 * Any other failure counts toward `retry.maxAttempts` (`OutboxNonRetryableError`: dead at once). The error text is
 * redacted of credentials. `connected` is the client's reported connection state, `undefined` when it reports none.
 */
export function failureOf(
  row: ClaimedOutboxRow,
  error: unknown,
  retry: ResolvedOutboxOptions['retry'],
  { connected, unreachableStreak }: { connected: boolean | undefined; unreachableStreak: number },
): OutboxFailure {
  const text = describeFailure(error);
  const errorType = errorTypeOf(error);
  if (error instanceof OutboxPublishTimeoutError || isTransportUnreachable(error, { connected })) {
    const delay = retryDelay(unreachableStreak + 1, retry);
    return { seq: row.seq, error: text, dead: false, retryDelay: delay, transportUnreachable: true, errorType };
  }
  const dead = error instanceof OutboxNonRetryableError || row.attempts >= retry.maxAttempts;
  return { seq: row.seq, error: text, dead, retryDelay: dead ? 0 : retryDelay(row.attempts, retry), errorType };
}

/**
 * The `published` event's entry of a sent row: its publish duration, and its commit-to-publish delay — its age at
 * claim on the database clock plus what this process took from the claim to the confirmation.
 */
export function publishedEntry(row: ClaimedOutboxRow, timing: { durationMs: number; confirmedAt: number } | undefined) {
  const { messageId, pattern, key, attempts } = row;
  if (!timing) return { messageId, pattern, key, attempts };
  const delayMs =
    row.ageMs === undefined || row.claimedAt === undefined
      ? undefined
      : row.ageMs + Math.max(0, timing.confirmedAt - row.claimedAt);
  const publishDurationMs = timing.durationMs;
  return { messageId, pattern, key, attempts, publishDurationMs, ...(delayMs === undefined ? {} : { delayMs }) };
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
 * given), unstarted rows released.
 */
export async function writeOutcome(
  database: OutboxDatabase,
  owner: string,
  outcome: BatchOutcome,
  deleteOnPublish: boolean,
  history?: AttemptHistoryOptions,
): Promise<CompletionCounts> {
  const { dataSource, dialect, table } = database;
  const sentSeqs = outcome.sent.map((r) => r.seq);
  const failures = outcome.failures.map((f) => f.failure);
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
  const fenced = sentSeqs.length - marked + (failures.length - rescheduled) + (outcome.unstarted.length - released);
  return { marked, rescheduled, released, fenced };
}
