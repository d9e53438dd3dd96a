/*
 * What `OutboxService.trace()` takes and returns: plain JSON (times as ISO 8601 strings on the database clock), so
 * it can be logged, sent by an API or shown by the console as it is.
 */

/** Options of one `trace()`. */
export interface OutboxTraceOptions {
  /**
   * The scope the key was recorded under when `id` is a request's idempotency key: the principal (`request.user.id`
   * or `sub`) by default, or what the route's `scope` option returned. Keys are scoped so that two clients' keys
   * never meet: a trace finds a request's key only in the scope it is given. Message ids need no scope.
   * @default '' (keys recorded without a principal)
   */
  scope?: string;
  /**
   * How many levels of messages are followed: the messages of the request (or the message `id` itself) are level
   * 1, the messages their consumers emitted level 2, and so on. Deeper levels are left out and the trace says so
   * (`truncated`). 1 to 20. @default 4
   */
  depth?: number;
  /**
   * Include the stored responses (body and headers, as the client received them) of the records. They may hold
   * personal data or tokens the app returned: off unless asked for. @default false
   */
  includeResponses?: boolean;
}

/** The default of `OutboxTraceOptions.depth`. */
export const DEFAULT_TRACE_DEPTH = 4;
/** The most messages listed per call (a record's emitted messages); more are left out, `truncated` set. */
export const TRACE_MESSAGES_PER_CALL = 100;

/** The idempotency record of (scope, key) `@Idempotent()`, an `@OnOutboxEvent()` handler or `once()` wrote. */
export interface OutboxTraceRecord {
  /** `request` (an HTTP key), `handler` (an `@OnOutboxEvent()` handler, scope `outbox-handler:<name>`) or `consumer`. */
  kind: 'request' | 'handler' | 'consumer';
  /** The scope of the record: the principal (requests), `outbox-handler:<name>`, or the consumer's scope. */
  scope: string;
  /** The client's idempotency key, or the id of the message the handler or consumer applied. */
  key: string;
  /**
   * `completed` (the call committed: its effect and the record), `expired` (completed, past its ttl: no longer
   * replayed or deduplicated) or `incomplete` (steps were recorded but the call has not committed: running now, or
   * failed and not retried yet).
   */
  state: 'completed' | 'expired' | 'incomplete';
  /** The stored HTTP status of a request (null for messages and incomplete calls). */
  responseStatus: number | null;
  /** When the record was written (with the commit of the call); null while incomplete. */
  createdAt: string | null;
  /** When it expires (no longer replayed or deduplicated, then deleted by the cleanup); null while incomplete. */
  expiresAt: string | null;
  /** The call's recorded steps (`idempotentStep()`), in the order they were written. */
  steps: Array<{ name: string; createdAt: string; expiresAt: string }>;
  /** Only with `includeResponses`: the stored response as JSON text (null when none). */
  response?: { body: string | null; headers: string | null };
  /** The messages the call emitted (its transaction's outbox rows), oldest first. */
  emitted: OutboxTraceMessage[];
}

/**
 * State of one destination's row: `in-flight` is pending under a live claim; `replaced` is a dead letter replaced by
 * a corrected copy (`OutboxDeadLetters.editAndRequeue()`; the copy is a message of its own id).
 */
export type OutboxTraceState = 'pending' | 'in-flight' | 'sent' | 'dead' | 'replaced';

/** One message: its rows in this outbox (one per destination) and the consumers in this database that applied it. */
export interface OutboxTraceMessage {
  /** The message id (the `x-message-id` header consumers deduplicate by). */
  messageId: string;
  /** Null when the message is not in this outbox (another service's message, consumed here; or deleted since). */
  pattern: string | null;
  /** Its ordering key. */
  key: string | null;
  /** The worst state of its rows (dead, in-flight, pending, sent, replaced in that order); null when not in this outbox. */
  state: OutboxTraceState | null;
  /** The idempotency record of the call that emitted it, null when none. */
  cause: { scope: string; key: string } | null;
  /** When it was written (its transaction's insert); null when not in this outbox. */
  createdAt: string | null;
  /** Its rows, one per destination, in write order. */
  destinations: OutboxTraceDestination[];
  /** The handlers and consumers that applied it here (their deduplication records), with what they emitted. */
  consumers: OutboxTraceRecord[];
}

/** One row of a message: where it goes and how its delivery went. */
export interface OutboxTraceDestination {
  /** `''` (every destination, decided at publish time), `broker:<token>` or `handler:<name>`. */
  destination: string;
  state: OutboxTraceState;
  /** Delivery attempts started (counting from the last requeue). */
  attempts: number;
  /** When it is (or was) due. */
  availableAt: string | null;
  /** When it was sent; null until then. */
  sentAt: string | null;
  /** When it went dead; null unless dead. */
  deadAt: string | null;
  /** When it expires (`emit()`'s `expiresIn` / `expiresAt`); null: never. */
  expiresAt: string | null;
  /** The last error (redacted of credentials when stored). */
  lastError: string | null;
  /** The recorded failed attempts (`publisher.attemptHistory`), oldest first. */
  failures: Array<{ attempt: number; at: string | null; error: string; counted: boolean }>;
}

/** What `trace(id)` found. */
export interface OutboxTrace {
  /** The key or message id traced, as given. */
  id: string;
  /** The scope searched for a request's key. */
  scope: string;
  /** The request of key `id` in `scope`, when there is one. */
  request: OutboxTraceRecord | null;
  /** The message of id `id`, when it is one (in this outbox, or consumed here). */
  message: OutboxTraceMessage | null;
  /** The depth followed (`OutboxTraceOptions.depth`). */
  depth: number;
  /** True when messages were left out (deeper than `depth`, or more than `TRACE_MESSAGES_PER_CALL` per call). */
  truncated: boolean;
}
