import { channel } from 'node:diagnostics_channel';

/**
 * What `@Idempotent()` did with one request or message: `executed` (the handler ran and its record committed),
 * `replayed` (HTTP: the stored response was sent again), `in_flight` (HTTP 409, or a message redelivered while its
 * first delivery runs), `mismatch` (HTTP 422: the key was used for a different request), `unavailable` (HTTP 503:
 * the database could not be reached), `invalid` (HTTP 400: a missing, empty or oversized key, or a body nested too
 * deeply), `duplicate_skipped` (a message already handled: the handler did not run), `failed` (a message's handler
 * threw: rolled back, then stored for retries under `@Idempotent({ retry })`, else requeued or left to the transport),
 * `accepted` (a message stored as an inbox row under `mode: 'accept-first'`: its handler runs from the row).
 */
export type IdempotencyOutcome =
  | 'executed'
  | 'replayed'
  | 'in_flight'
  | 'mismatch'
  | 'unavailable'
  | 'invalid'
  | 'duplicate_skipped'
  | 'failed'
  | 'accepted';

/** Published on `OUTBOX_IDEMPOTENCY_CHANNEL` for each outcome. */
export interface OutboxIdempotencyEvent {
  outcome: IdempotencyOutcome;
  /** The route or consumer: `Controller.handler`. */
  consumer: string;
  /** `http` for a request, `rpc` for a message. */
  kind: 'http' | 'rpc';
  /** The DataSource the key was recorded in (`'default'` for the default one; `@Idempotent({ dataSource })`). */
  dataSource: string;
}

/** The `node:diagnostics_channel` channel of `@Idempotent()` outcomes (`OutboxIdempotencyEvent`). */
export const OUTBOX_IDEMPOTENCY_CHANNEL = 'nestjs-outbox:idempotency';

const outcomes = channel(OUTBOX_IDEMPOTENCY_CHANNEL);

/** Publishes an outcome of `handler` (its consumer name and DataSource), if anyone listens (nothing is built otherwise). */
export function reportIdempotencyOutcome(
  outcome: IdempotencyOutcome,
  handler: { consumer: string; dataSource: string },
  kind: 'http' | 'rpc',
): void {
  if (!outcomes.hasSubscribers) return;
  const { consumer, dataSource } = handler;
  outcomes.publish({ outcome, consumer, kind, dataSource } satisfies OutboxIdempotencyEvent);
}

/** The outcome an HTTP problem status stands for. */
export function outcomeOfStatus(status: number): IdempotencyOutcome {
  if (status === 409) return 'in_flight';
  if (status === 422) return 'mismatch';
  if (status === 503) return 'unavailable';
  return 'invalid';
}
