/**
 * What `retryIf` is told of the message whose attempt failed: the outbox row's message (a relay publish, an
 * `@OnOutboxEvent()` handler's run, a broker consumer's run from its inbox row, or a consumer's first delivery).
 */
export interface OutboxRetryMessage {
  messageId: string;
  /** The message's pattern (a consumer's: its `@EventPattern`'s), the one the `patterns` policies match. */
  pattern: string;
  /** The ordering key, or null. */
  key: string | null;
  /**
   * Where the row goes: `''` (every destination of the message), `broker:<token>`, `handler:<name>` or
   * `consumer:<name>` (a broker consumer's inbox row).
   */
  destination: string;
  /** The payload, parsed from JSON. */
  payload: unknown;
  /** The headers, or `{}`. */
  headers: Record<string, string>;
}

/**
 * Decides whether a failed attempt may be retried: `false` makes the message a dead letter at once (as
 * `OutboxNonRetryableError` does), `true` retries it until `maxAttempts`. Called with the error (for a handler or a
 * consumer: what it threw, not the library's wrapper), the attempt that failed (1 for the first) and the message.
 * Not called for failures that give their attempt back (an unreachable broker, an open circuit breaker, a handler
 * running elsewhere), nor for `OutboxNonRetryableError` (dead anyway), nor once `maxAttempts` is reached. A
 * `retryIf` that throws counts as `true`: the message is retried as without it.
 */
export type OutboxRetryIf = (error: unknown, attempt: number, message: OutboxRetryMessage) => boolean;

/**
 * The policy of one message pattern (`retry.patterns`): the fields given replace those of the `retry` object it is
 * in, the others are taken from it (`retryIf` included).
 */
export interface OutboxRetryPolicy {
  /** As `retry.maxAttempts`. @default the enclosing retry's */
  maxAttempts?: number;
  /** As `retry.initialDelay`. @default the enclosing retry's */
  initialDelay?: number;
  /** As `retry.factor`. @default the enclosing retry's */
  factor?: number;
  /** As `retry.maxDelay`. @default the enclosing retry's */
  maxDelay?: number;
  /** As `retry.jitter`. @default the enclosing retry's */
  jitter?: number;
  /** As `retry.retryIf`. @default the enclosing retry's */
  retryIf?: OutboxRetryIf;
}

/** How failed publishes are retried: exponential backoff with jitter, then the dead state. */
export interface OutboxRetryOptions {
  /**
   * Attempts before a message is marked dead. An attempt counts when it starts, so a message that crashes the
   * process is counted too. A failure to reach the broker (connection refused, reset or lost, DNS, a client not
   * connected, a publish timeout while the client reports itself disconnected) gives its attempt back: the message
   * waits with backoff capped at `maxDelay` and never goes dead because of an outage. Failures of the message itself
   * (rejected or nacked by the broker, unserializable, a timeout while connected) count.
   * @default 10
   */
  maxAttempts?: number;
  /** Milliseconds before the first retry. @default 1000 */
  initialDelay?: number;
  /** Multiplier of the delay after each failed attempt. @default 2 */
  factor?: number;
  /** Upper bound of the delay in milliseconds. @default 300000 (5 minutes) */
  maxDelay?: number;
  /** Fraction (0–1) of the delay randomized, so retries of many messages spread out. @default 0.2 */
  jitter?: number;
  /**
   * Failed attempts kept per message in the attempt history (`outbox_attempts`, shown by
   * `OutboxDeadLetters.get()`): the newest ones, with their time, redacted error, owner token and publisher. Written
   * in the same transaction that reschedules the message or marks it dead; deleted with the message. 0 keeps none
   * (and writes nothing). An integer from 0 to 1000.
   * @default 10
   */
  historyLimit?: number;
  /**
   * Whether a failed attempt may be retried (see `OutboxRetryIf`): `false` makes the message dead at once.
   * @default none (every failure is retried until `maxAttempts`)
   */
  retryIf?: OutboxRetryIf;
  /**
   * Policies per message pattern, by glob: `{ 'audit.*': { maxAttempts: 2 } }`. A glob's `*` matches any run of
   * characters within one segment (segments are separated by `.` or `/`), `**` any run across segments; every
   * other character matches itself. When several globs match a pattern, the most specific wins: a glob without
   * wildcard (the pattern itself), else the one with the most literal characters, else the one with fewer `**`,
   * else the first declared. A pattern no glob matches takes this object's fields. Each policy refines this
   * object (see `OutboxRetryPolicy`); `historyLimit` is one for the whole outbox. Applies to the relay's publishes
   * and `@OnOutboxEvent()` handlers (the module's `retry`) and to broker consumers (`idempotency.retry`,
   * `@Idempotent({ retry })`, where a consumer's policies are added to the module-wide ones, the same glob
   * replaced). See docs/configuration.md, "Retries".
   * @default none
   */
  patterns?: Readonly<Record<string, OutboxRetryPolicy>>;
}

/** The backoff fields of a retry, every one set. */
export interface ResolvedRetryBackoff {
  maxAttempts: number;
  initialDelay: number;
  factor: number;
  maxDelay: number;
  jitter: number;
}

/** One retry policy after validation: the backoff and the `retryIf`, if any. */
export interface ResolvedRetryPolicy extends ResolvedRetryBackoff {
  retryIf?: OutboxRetryIf;
}

/** One `patterns` entry after validation: its glob, what it was given and what it resolved to over its retry. */
export interface ResolvedPatternPolicy {
  glob: string;
  /** The fields the entry gave (re-resolved when a consumer's retry refines the module-wide one). */
  own: OutboxRetryPolicy;
  policy: ResolvedRetryPolicy;
}

/** The module's `retry` after validation. `patterns` is absent when none was given, else most specific first. */
export interface ResolvedOutboxRetry extends ResolvedRetryPolicy {
  historyLimit: number;
  patterns?: readonly ResolvedPatternPolicy[];
}

export const DEFAULT_RETRY_OPTIONS: Readonly<ResolvedRetryBackoff & { historyLimit: number }> = Object.freeze({
  maxAttempts: 10,
  initialDelay: 1000,
  factor: 2,
  maxDelay: 300_000,
  jitter: 0.2,
  historyLimit: 10,
});

/**
 * Retries of a broker consumer's failed message under `@Idempotent({ retry })` (and the module-wide default
 * `idempotency: { retry }`): the same backoff as the module's `retry`, counted per message from its first delivery
 * (see docs/idempotency.md, "When a consumer fails"). The attempt history kept is the module's `retry.historyLimit`.
 */
export type ConsumerRetryOptions = Omit<OutboxRetryOptions, 'historyLimit'>;

/** A consumer's retries after validation: every backoff field set. */
export type ResolvedConsumerRetry = Readonly<Omit<ResolvedOutboxRetry, 'historyLimit'>>;
