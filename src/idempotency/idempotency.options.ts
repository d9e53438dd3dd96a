import type { ExecutionContext } from '@nestjs/common';
import type { ConsumerRetryOptions, ResolvedConsumerRetry } from '../retry.options';

/**
 * Module-wide defaults of `@Idempotent()`, given as `OutboxModule.forRoot({ idempotency: { … } })`. Each one can be
 * overridden per controller or per handler in `@Idempotent(options)`.
 */
export interface IdempotencyDefaults {
  /**
   * HTTP request header that carries the key (matched case-insensitively).
   * @default 'Idempotency-Key'
   */
  header?: string;
  /**
   * HTTP: answer 400 when a request has no key. When false, a request without a key runs the handler unguarded
   * (no transaction is opened for it). Message handlers never reject: a message without an id runs in a transaction
   * without a record (no deduplication), with a warning once per handler, and is settled like any other (see the
   * message handlers in docs/idempotency.md).
   * @default true
   */
  required?: boolean;
  /**
   * HTTP: the longest key accepted, in characters (1 to 255, the size of the record's key column); a longer key is
   * answered 400 (`idempotency-key-invalid`). Published as the header's `maxLength` in the OpenAPI document.
   * @default 255
   */
  maxKeyLength?: number;
  /**
   * Milliseconds a completed record is kept (and replayed) after it was written; the scheduled cleanup removes it
   * afterwards. For message handlers keep it longer than any redelivery or requeue can take.
   * @default 86400000 (24 hours)
   */
  ttl?: number;
  /**
   * Seconds sent in the `Retry-After` header of a 409 (same key still in flight) and of a 503 (database unreachable
   * or busy).
   * @default 1
   */
  retryAfter?: number;
  /**
   * Milliseconds a request waits for a pooled connection to take its key (PostgreSQL, MySQL/MariaDB). The drivers'
   * pools can queue without limit (mysql2 always, `pg` without `connectionTimeoutMillis`); past this the request is
   * answered 503 `database-busy` with `Retry-After`, and a connection that arrives later goes back to the pool. A key
   * this process is running right now is answered 409 (`idempotency-key-in-use`) without waiting for a connection.
   * @default 5000
   */
  connectionTimeout?: number;
  /**
   * Milliseconds the library's own statements wait for a lock another transaction holds: taking a key, writing its
   * record. PostgreSQL: `SET LOCAL lock_timeout` around them
   * only (the handler's statements keep the session's setting). Past it: 503 `database-busy` (HTTP), or the message
   * is treated as in flight. The key is otherwise taken with locks that never wait.
   * @default 2000
   */
  lockTimeout?: number;
  /**
   * PostgreSQL: milliseconds the library waits for the answer to one of its own round trips (taking the key with
   * BEGIN, writing the record with COMMIT), measured by the client (`pg`'s `query_timeout`), so a database that stalls
   * without closing connections cannot hold a request: past it the connection is discarded and the request answered
   * 503 `database-unavailable` (after a commit its outcome is unknown; a retry with the same key finds out). Greater
   * than `lockTimeout`. The handler's own statements are bounded by the DataSource's timeouts (see
   * docs/reliability.md).
   * @default 5000
   */
  statementTimeout?: number;
  /**
   * Response headers stored with a completed HTTP response and sent again on replay (lower case). Headers set by
   * `@Header()` are sent by the route itself on replay and need not be listed.
   * @default ['location', 'content-location', 'etag']
   */
  replayHeaders?: string[];
  /**
   * RabbitMQ consumers: whether the interceptor settles every message itself — it acks after the transaction with
   * the record commits (and acks a skipped duplicate), and requeues after `retryAfter` seconds when the handler
   * fails or the same message is in flight. The handler must then not call `channel.ack(message)` itself: a second
   * ack of one delivery is a channel error that closes the channel. Leave it out and it is derived when the app
   * boots from the consumer that delivers the handler's messages: true for `noAck: false`, false for `noAck: true`
   * (Nest's default, where the broker acks at delivery and any ack closes the channel). A value that contradicts
   * the consumer fails start-up with an `OutboxConfigurationError` (code `OUTBOX_ACK_MODE`) naming both settings;
   * so does a pattern two handlers share on a `noAck: false` consumer unless one has `manualAck: true` and the
   * others `false`. Where the consumer cannot be told (no RabbitMQ server of the app delivers the pattern yet, or a
   * custom strategy that does not expose `noAck`), the value given is used, false when none. See docs/idempotency.md.
   * @default derived from the consumer's `noAck` (false where it cannot be determined)
   */
  manualAck?: boolean;
  /**
   * HTTP: which errors of a handler are its final outcome, kept and replayed like a response (Stripe replays a
   * declined payment rather than attempting it again). The handler's transaction still rolls back; the error's
   * status and body (`getStatus()`, `getResponse()`, as Nest's exception filter sends them) are then committed as
   * the key's record in a short transaction of its own, if the key is still free, and a retry gets them with
   * `Idempotent-Replayed: true`. Only an `HttpException` the handler itself threw can be final: an error of a pipe
   * (a `ValidationPipe` 400; the handler never started), a 5xx and the idempotency problems never are, and free
   * the key as before. `true` applies the default policy: 4xx except 408, 409, 425 and 429, which a retry may turn
   * out differently. `false` keeps no error. A function decides for each `HttpException` under 500.
   * @default true
   */
  replayErrors?: boolean | ((error: unknown) => boolean);
  /**
   * `@EventPattern` consumers: bounded retries of a message whose handler throws. The handler's effect is rolled
   * back; in a short transaction of its own the message is stored as an inbox row of the outbox (destination
   * `consumer:<ControllerName.methodName>`) and the broker message is settled (acked with `manualAck`), so the queue
   * keeps flowing; the relay runs the handler again from the row with this backoff, deduplicated by the same record
   * as the broker's deliveries, and after `maxAttempts` (the first delivery included) the row is a dead letter of
   * `OutboxDeadLetters` (`OutboxNonRetryableError`, or `retryIf` answering false: at once). The policy is the one of
   * the consumer's `@EventPattern` pattern when `patterns` has one (see `OutboxRetryOptions.patterns`; a consumer's
   * globs are added to the module-wide ones). `true` takes the defaults (or the module-wide
   * `idempotency.retry`), an object refines them, `false` keeps the old behaviour (requeued for ever with
   * `manualAck`, else the error goes to the transport). Not for `@MessagePattern` (its caller gets the error) nor a
   * message without an id. The process that runs the publisher must have the controller. See docs/idempotency.md.
   * @default false
   */
  retry?: ConsumerRetryOptions | boolean;
}

/** `@Idempotent(options)`: the defaults above plus how the key, scope and fingerprint are found. */
export interface IdempotentOptions extends IdempotencyDefaults {
  /**
   * Who the key belongs to; records are unique per (scope, key), so one scope never sees another's response.
   * Return e.g. a tenant or API-key id (from `context.switchToHttp().getRequest()`); it overrides the default, and
   * returning undefined falls back to it. Up to 255 characters (longer scopes are hashed).
   * @default HTTP: the authenticated principal — `request.user.id`, else `request.user.sub`, as a string (as
   * Passport and JWT guards set it; another principal is this option's job); '' when the request has no
   * principal, shared by every client and warned about once per route. Messages: the consumer,
   * 'ControllerName.methodName'
   */
  scope?: (context: ExecutionContext) => string | undefined | Promise<string | undefined>;
  /**
   * A custom key extractor, called with the HTTP request or with the message data. Return undefined for "no key".
   * @default HTTP: the `header`; messages: the outbox message id (`getOutboxMessageId()`)
   */
  key?: (source: any, context: ExecutionContext) => string | undefined;
  /**
   * What makes two requests "the same request" for one key (a different one answers 422). Any value: it is hashed
   * with a key-order-independent serialization.
   * @default HTTP: method, path, query and body; messages: the data
   */
  fingerprint?: (source: any, context: ExecutionContext) => unknown;
  /**
   * The DataSource whose outbox records the key (in the same transaction as the handler's writes), as given to
   * `OutboxModule.forRoot({ dataSource })`; that outbox must be visible to the controller's module (imported there,
   * or `isGlobal`). The module-wide defaults are that outbox's `idempotency` options. A controller's methods cannot
   * name another DataSource than the controller: put `@Idempotent()` on the methods instead.
   * @default the default DataSource's outbox
   */
  dataSource?: string;
  /**
   * `@EventPattern` consumers: when the handler runs. `'process'` runs it at delivery, in the transaction that writes
   * its record, and settles the broker message after the commit. `'accept-first'` runs nothing at delivery: the
   * message is stored as an inbox row of the outbox (destination `consumer:<ControllerName.methodName>`, due at once)
   * in a short transaction, the broker message is settled (acked with `manualAck`), and the relay, woken at once,
   * runs the handler from the row, applied once under the same record — for handlers slower than the broker's
   * lease (RabbitMQ's `consumer_timeout`) and webhooks. The row is retried with the consumer's `retry` (its own or
   * the module-wide `idempotency.retry`; the default retry options when neither is set) and goes dead after
   * `maxAttempts`; `retry: false` is refused here, as the broker no longer redelivers. Not for HTTP routes nor
   * `@MessagePattern` (its caller waits for the answer): refused at start-up. A message without an id is handled
   * at delivery (there is nothing to deduplicate its row by). See docs/idempotency.md, "Accept first, process later".
   * @default 'process'
   */
  mode?: 'process' | 'accept-first';
}

/** The defaults after validation. */
export type ResolvedIdempotencyDefaults = Omit<Required<IdempotencyDefaults>, 'retry' | 'manualAck'> & {
  /** A consumer's retries (`retry`), or false: none. */
  retry: ResolvedConsumerRetry | false;
  /** `manualAck` as given; undefined: derived from the handler's consumer. */
  manualAck: boolean | undefined;
};

export const DEFAULT_IDEMPOTENCY_OPTIONS: Readonly<ResolvedIdempotencyDefaults> = Object.freeze({
  header: 'Idempotency-Key',
  required: true,
  maxKeyLength: 255,
  ttl: 86_400_000,
  retryAfter: 1,
  connectionTimeout: 5000,
  lockTimeout: 2000,
  statementTimeout: 5000,
  replayHeaders: ['location', 'content-location', 'etag'],
  manualAck: undefined,
  replayErrors: true,
  retry: false,
});

/** Longest key (and scope) accepted, as Stripe and the IETF draft's examples use. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** Response header that marks a replayed response. */
export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';

/** Metadata key of `@Idempotent()` options (class and method). */
export const IDEMPOTENT_OPTIONS = 'nestjs-outbox:idempotent';

/** The options of one handler: module defaults ← class ← method. */
export type ResolvedIdempotentOptions = Omit<ResolvedIdempotencyDefaults, 'manualAck'> &
  Pick<IdempotentOptions, 'scope' | 'key' | 'fingerprint'> & {
    /** When a consumer's handler runs (`mode`): at delivery, or from its inbox row after the message is acked. */
    mode: 'process' | 'accept-first';
    /** Whether the interceptor settles RabbitMQ messages: as given, else derived from the consumer's `noAck`. */
    manualAck: boolean;
    /** Lower-case header name. */
    headerKey: string;
    /** 'Controller.method', the default scope of message handlers. */
    consumer: string;
    /** The DataSource the key is recorded in (`'default'` for the default one). */
    dataSource: string;
  };

/** The response that is stored and replayed. */
export interface StoredResponse {
  status: number | null;
  /** JSON text, or null for "no body". */
  body: string | null;
  /** JSON text of the replayed headers, or null. */
  headers: string | null;
}

/** What identifies one idempotent call. */
export interface IdempotentCall {
  scope: string;
  key: string;
  fingerprint: string;
  options: ResolvedIdempotentOptions;
}

/** Runs the guarded handler (through Nest's `next.handle()`), resolving with its last value. */
export type HandlerBody = () => Promise<unknown>;
