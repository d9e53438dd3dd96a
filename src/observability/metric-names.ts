/**
 * Names of the instruments of the meter `nestjs-outbox` (see docs/observability.md for units, attributes and
 * meaning). Messaging semantic-convention names where one applies; `outbox.*` for the rest.
 */
export const OUTBOX_METRICS = Object.freeze({
  /** Counter, `{message}`: publish attempts (success and failure; `error.type` on failure). */
  sentMessages: 'messaging.client.sent.messages',
  /**
   * Histogram, `s`: from the start of a publish to the broker's confirmation or the failure — the confirm latency
   * (a late confirm, past `publishTimeout`, included).
   */
  operationDuration: 'messaging.client.operation.duration',
  /**
   * Counter, `{run}`: runs of in-process `@OnOutboxEvent()` handlers from the outbox (`outbox.handler.name`;
   * `error.type` on failure). Not broker sends: they are left out of `sentMessages` and `operationDuration`.
   */
  handlerRuns: 'outbox.handler.runs',
  /** Histogram, `s`: from the commit that wrote the row to the broker's confirmation. */
  publishDelay: 'outbox.publish.delay',
  /** Counter, `{message}`: failed attempts rescheduled with backoff. */
  retried: 'outbox.messages.retried',
  /** Counter, `{message}`: messages moved to the dead letters. */
  deadLettered: 'outbox.messages.dead_lettered',
  /** Counter, `{message}`: dead messages made pending again by `OutboxDeadLetters.requeue()`. */
  requeued: 'outbox.messages.requeued',
  /**
   * Counter, `{message}`: messages not published because their expiry passed first (`outbox.expired.outcome`:
   * `dead` or `drop`, per `publisher.onExpired`).
   */
  expired: 'outbox.relay.expired',
  /** Counter, `{message}`: published messages whose claim another publisher had taken over before they were marked. */
  leaseLost: 'outbox.messages.lease_lost',
  /** Observable gauge, `{message}`: rows waiting to be published (due or not, claimed or not). */
  pending: 'outbox.backlog.pending',
  /** Observable gauge, `{message}`: pending rows due now and not claimed. */
  due: 'outbox.backlog.due',
  /** Observable gauge, `{message}`: pending rows claimed by a publisher whose lease runs. */
  inFlight: 'outbox.backlog.in_flight',
  /** Observable gauge, `{message}`: dead rows waiting to be requeued or purged. */
  dead: 'outbox.backlog.dead',
  /** Observable gauge, `s`: age of the oldest pending row on the database clock (0 when none). */
  oldestPendingAge: 'outbox.backlog.oldest_pending.age',
  /**
   * Observable gauge, `1`: 1 while the broker confirms late (a confirm waited past `publishTimeout` on a connected
   * client, and full batches have not been confirmed promptly since), else 0. See `OutboxPublisher.brokerSlow`.
   */
  brokerSlow: 'outbox.relay.broker.slow',
  /**
   * Observable gauge, `1`: per broker (`outbox.broker`, its client token's name), its circuit breaker's state in
   * this process: 0 closed, 1 half-open (one probe publish decides), 2 open (its messages wait, attempts not
   * counted). Reported only with `publisher.circuitBreaker` on. See `OutboxPublisher.circuits`.
   */
  breakerState: 'outbox.relay.breaker.state',
  /**
   * Observable gauge, `By`: WAL relay (PostgreSQL, `publisher.mode: 'wal'`): WAL the slot's reader has not yet
   * acknowledged. Reported only while the WAL mode is on. See `OutboxPublisher.walLag()`.
   */
  walSlotLag: 'outbox.wal.slot.lag',
  /** Observable gauge, `By`: WAL relay: WAL the server retains for the outbox's slot (`max_slot_wal_keep_size`). */
  walRetained: 'outbox.wal.slot.retained',
  /** Counter, `{request}`: idempotency-key outcomes per route or consumer (`outbox.idempotency.outcome`). */
  idempotency: 'outbox.idempotency.requests',
});

/** The meter's name. */
export const OUTBOX_METER = 'nestjs-outbox';

/**
 * Bucket boundaries (s) of the publish duration: the messaging conventions' advice, then up to the default
 * `maxConfirmWait` (5 minutes), where late confirms fall.
 */
export const DURATION_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 300,
];

/** Bucket boundaries (s) of the commit-to-publish delay: the duration's, then up to an hour. */
export const DELAY_BUCKETS = [...DURATION_BUCKETS, 900, 3600];
