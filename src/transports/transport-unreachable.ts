import { OutboxNonRetryableError, OutboxPublishTimeoutError } from '../errors';

/** Socket and DNS error codes of a broker that cannot be reached (Node's `net`/`dns`, and NATS's own codes). */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EPIPE',
  // nats.js
  'CONNECTION_REFUSED',
  'CONNECTION_CLOSED',
  'CONNECTION_TIMEOUT',
  'CONNECTION_DRAINING',
  'DISCONNECT',
]);

/**
 * Messages of clients that are not connected, as @nestjs/microservices and the broker clients word them:
 * Nest's "Connection lost. Trying to reconnect..." (a string, RMQ/NATS/MQTT/Redis) and "Connection to transport
 * failed"; amqplib's "Unexpected close" / "Socket closed abruptly"; amqp-connection-manager's "Not connected." and
 * "Channel closed" (its unsent messages when the connection goes away); ioredis' "Connection is closed." and its
 * offline-queue refusals; MQTT.js's "client disconnecting" / "Connection closed".
 */
const UNREACHABLE_MESSAGES = [
  /connection lost\. trying to reconnect/i,
  /connection to transport failed/i,
  /disconnected from rmq/i,
  /^unexpected close$/i,
  /socket closed abruptly/i,
  /^not connected\.?$/i,
  /^channel closed$/i,
  /^connection is closed\.?$/i,
  /stream isn't writeable and enableOfflineQueue/i,
  /reached the max retries per request limit/i,
  /^client disconnecting$/i,
  /^connection closed\b/i,
];

/** kafkajs' error classes of a broker that cannot be reached. */
const UNREACHABLE_NAMES = new Set(['KafkaJSConnectionError', 'KafkaJSConnectionClosedError', 'KafkaJSBrokerNotFound']);

const MAX_DEPTH = 4;

/** What is known of the client's connection when the publish failed. */
export interface TransportState {
  /** `false` when the client reported itself disconnected (its `status`); `undefined` when unknown. */
  connected?: boolean;
}

/**
 * True when a publish failed because the broker could not be reached — connection refused, reset or timed out,
 * DNS failure, a client not connected (or reconnecting) — rather than because of the message itself. Such a
 * failure does not count toward `retry.maxAttempts`: the message waits with capped backoff until the broker is back.
 *
 * A publish timeout counts as unreachable only while the client reports itself disconnected (the publisher gives the
 * attempt of any timeout back anyway: see `failureOf()`). `OutboxNonRetryableError` never is unreachable.
 * Everything else (the broker rejected or nacked the message, a serializer threw) counts as a message failure.
 */
export function isTransportUnreachable(error: unknown, state: TransportState = {}): boolean {
  if (error instanceof OutboxNonRetryableError) return false;
  if (error instanceof OutboxPublishTimeoutError) return state.connected === false;
  return matches(error, 0);
}

function matches(error: unknown, depth: number): boolean {
  if (depth > MAX_DEPTH || error === null || error === undefined) return false;
  if (typeof error === 'string') return UNREACHABLE_MESSAGES.some((re) => re.test(error.replace(/^Error:\s*/, '')));
  if (typeof error !== 'object') return false;
  const e = error as {
    code?: unknown;
    name?: unknown;
    message?: unknown;
    err?: unknown;
    cause?: unknown;
    chainedError?: unknown;
    errors?: unknown;
  };
  if (typeof e.code === 'string' && UNREACHABLE_CODES.has(e.code)) return true;
  if (typeof e.name === 'string' && UNREACHABLE_NAMES.has(e.name)) return true;
  if (typeof e.message === 'string' && matches(e.message, depth)) return true;
  // amqp-connection-manager `{ err, url }`, NATS `chainedError`, `cause`; Node's AggregateError (dual-stack connect).
  if ([e.err, e.chainedError, e.cause].some((inner) => inner !== error && matches(inner, depth + 1))) return true;
  return Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every((inner) => matches(inner, depth + 1));
}

/** The connection states of Nest clients' `status` observable that mean "not connected". */
const DISCONNECTED_STATUSES = new Set(['disconnected', 'reconnecting', 'closed', 'crashed', 'stopped']);

/** True for a Nest client status that means the client is not connected (`disconnected`, `reconnecting`, …). */
export function isDisconnectedStatus(status: unknown): boolean {
  return typeof status === 'string' && DISCONNECTED_STATUSES.has(status);
}
