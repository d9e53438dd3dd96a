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
   * Picks the client of one message, when it is written (`emit()` / `emitMany()`): the message gets a row for that
   * client (`broker:<token>`) beside one per `@OnOutboxEvent()` handler, each delivered on its own, and a key's order
   * holds per client — one client's outage holds back only its own rows. Keep it pure and fast. Returning a token
   * not in `clients` (or throwing) does not lose the message nor fail `emit()`: the message is written as one row for
   * every destination, `select()` runs again at publish time, and the attempt fails with `OutboxRouteError`, is
   * retried with backoff and, after `retry.maxAttempts`, dead-lettered. Return `null` for a message that must not
   * leave the process: it goes to its `@OnOutboxEvent()` handlers only (`undefined` is an error, so a forgotten case
   * is not taken for that).
   */
  select: (message: OutboxRouteMessage) => InjectionToken | null;
}
