import type { InjectionToken } from '@nestjs/common';

/** What `OutboxRoute.select()` sees of a message: everything but its payload. */
export interface OutboxRouteMessage {
  /** The message's id (stable across retries). */
  readonly messageId: string;
  /** The pattern given to `emit()`. */
  readonly pattern: string;
  /** The ordering key given to `emit()`, or null. */
  readonly key: string | null;
  /** The headers given to `emit()` (without the message id). */
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * Sends each message to one of several `ClientProxy`s (instead of the single `client`). Every client is looked up
 * and checked when the app starts, so a typo fails `app.init()`, not the first publish.
 *
 * ```ts
 * route: {
 *   clients: ['ORDERS_RMQ', 'AUDIT_NATS'],
 *   select: ({ pattern }) => (pattern.startsWith('audit.') ? 'AUDIT_NATS' : 'ORDERS_RMQ'),
 * }
 * ```
 */
export interface OutboxRoute {
  /**
   * Injection tokens of every `ClientProxy` that `select()` may return, as registered with
   * `ClientsModule.register([{ name: TOKEN, transport, options }])`. At least one; each must resolve at startup.
   */
  clients: readonly InjectionToken[];
  /**
   * Picks the client of one message (called once per publish attempt, so keep it pure: the same message must go
   * to the same client). Returning a token not in `clients` (or throwing) does not lose the message: the attempt
   * fails with `OutboxRouteError`, is retried with backoff and, after `retry.maxAttempts`, dead-lettered.
   * Return `null` for a message that must not leave the process: it goes to its `@OnOutboxEvent()` handlers only
   * (`undefined` is an error, so a forgotten case is not taken for that). Per-key order holds over all of a key's
   * messages, so route by pattern or by key, so that one client's outage holds back only the keys that have
   * messages for it.
   */
  select: (message: OutboxRouteMessage) => InjectionToken | null;
}
