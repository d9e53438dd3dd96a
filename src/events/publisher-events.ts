/** Reported when a publisher could not mark rows it published because its claim was taken over (lease lost). */
export interface OutboxLeaseLostEvent {
  /** The outbox it comes from: the name of its DataSource (`'default'` for the default one). */
  dataSource: string;
  /** Fencing token of the claim that was lost. */
  owner: string;
  /** Message ids of the batch whose completion write was refused (some may have been marked by the new owner). */
  messageIds: string[];
  /** Number of rows whose completion write was refused. */
  lost: number;
}

/** Reported when a message exhausted its attempts, or failed with `OutboxNonRetryableError`. */
export interface OutboxDeadEvent {
  /** The outbox it comes from: the name of its DataSource (`'default'` for the default one). */
  dataSource: string;
  messageId: string;
  pattern: string;
  key: string | null;
  /** The row's destination: `broker:<token>`, `handler:<name>`, or `''` (every destination of the message). */
  destination: string;
  attempts: number;
  /** What went wrong, redacted of credentials. */
  error: string;
  /** Class name of the error of the last attempt (e.g. `OutboxNonRetryableError`), when known. */
  errorType?: string;
  /** How long the last attempt ran before it failed (ms), when known. */
  publishDurationMs?: number;
}

/**
 * Reported for each message the publisher did not publish because its expiry (`emit()`'s `expiresIn` /
 * `expiresAt`) had passed: it is now a dead letter, or was dropped (`publisher.onExpired`).
 */
export interface OutboxExpiredEvent {
  /** The outbox it comes from: the name of its DataSource (`'default'` for the default one). */
  dataSource: string;
  messageId: string;
  pattern: string;
  key: string | null;
  /** The row's destination: `broker:<token>`, `handler:<name>`, or `''` (every destination of the message). */
  destination: string;
  /** What became of it: `'dead'` (listed by `OutboxDeadLetters`) or `'drop'` (deleted). */
  outcome: 'dead' | 'drop';
  /** How long ago it expired when the publisher found it (ms, database clock at the claim, plus local time since). */
  expiredForMs: number;
}

/** Reported for each failed attempt that will be retried. */
export interface OutboxRetryEvent {
  /** The outbox it comes from: the name of its DataSource (`'default'` for the default one). */
  dataSource: string;
  messageId: string;
  pattern: string;
  /** The row's destination: `broker:<token>`, `handler:<name>`, or `''` (every destination of the message). */
  destination: string;
  attempts: number;
  /** Milliseconds until the next attempt. */
  retryDelay: number;
  /** What went wrong, redacted of credentials. */
  error: string;
  /**
   * The broker could not be reached (connection refused or lost, DNS, a timeout while disconnected): this failure
   * did not count toward `retry.maxAttempts`, and `attempts` is the count without it.
   */
  transportUnreachable: boolean;
  /** Class name of the error (e.g. `OutboxPublishTimeoutError`), when known. */
  errorType?: string;
  /** How long the attempt ran before it failed (ms), when known. */
  publishDurationMs?: number;
}

/**
 * Reported once per pass for the messages the broker confirmed (emitted only while someone listens, on the
 * publisher or on the `nestjs-outbox:published` diagnostics channel).
 */
export interface OutboxPublishedEvent {
  /** The outbox it comes from: the name of its DataSource (`'default'` for the default one). */
  dataSource: string;
  /** Fencing token of the claim they were published under. */
  owner: string;
  messages: OutboxPublishedMessage[];
}

/** One message of an `OutboxPublishedEvent`. */
export interface OutboxPublishedMessage {
  messageId: string;
  pattern: string;
  key: string | null;
  attempts: number;
  /** The row's destination: `broker:<token>`, `handler:<name>`, or `''` (every destination of the message). */
  destination: string;
  /** From the start of the publish to the broker's confirmation (ms), when measured. */
  publishDurationMs?: number;
  /**
   * From the commit that wrote the row to the broker's confirmation (ms): the row's age at claim on the database
   * clock (now − `created_at`) plus the time this process took from the claim to the confirmation. When measured.
   */
  delayMs?: number;
}

/** Reported by `OutboxDeadLetters.requeue()` when it made dead messages pending again. */
export interface OutboxRequeuedEvent {
  /** The outbox it comes from: the name of its DataSource (`'default'` for the default one). */
  dataSource: string;
  /** Messages requeued in all. */
  requeued: number;
  /** How many of them per pattern (counted in the requeue's transaction, before its update). */
  patterns: Array<{ pattern: string; count: number }>;
}

/** Events of `OutboxPublisher` (`publisher.on('leaseLost', listener)`). */
export interface OutboxPublisherEvents {
  published: OutboxPublishedEvent;
  leaseLost: OutboxLeaseLostEvent;
  dead: OutboxDeadEvent;
  retry: OutboxRetryEvent;
  requeued: OutboxRequeuedEvent;
  expired: OutboxExpiredEvent;
}

/**
 * What the publisher builds for an event: the event without `dataSource`, which `PublisherEventEmitter` adds (each
 * outbox's publisher has its own emitter).
 */
export type OutboxEventPayload<E extends keyof OutboxPublisherEvents> = Omit<OutboxPublisherEvents[E], 'dataSource'>;
