import type { ExecutionContext, Logger } from '@nestjs/common';
import type { Reflector } from '@nestjs/core';
import { RmqContext, RpcException } from '@nestjs/microservices';
import { PATTERN_HANDLER_METADATA } from '@nestjs/microservices/constants';
import { describeError } from '../util/describe-error';
import type { StoredIdempotencyRecord } from '../dialects/key-store';
import type { IdempotentCall, ResolvedIdempotentOptions } from './idempotency.options';
import { getOutboxMessageId } from '../transports/incoming-message-id';
import { fingerprintOf, JsonNestingTooDeepError } from './fingerprint';

/**
 * How a message handled under `@Idempotent()` is settled with its broker: with `manualAck` (RabbitMQ, `noAck:
 * false`) acknowledged after the commit (or after a duplicate is skipped) and requeued after `retryAfter` seconds
 * when the handler fails or the same message is in flight; a `@MessagePattern` caller is refused instead. Also how
 * a duplicate, a message in flight and a message without an id are handled and logged. Imported as `settlement`.
 */

/**
 * Acknowledges the message, or requeues it after `retryAfter` seconds, when `manualAck` is set and the message came
 * from RabbitMQ. Returns whether it did anything. A channel that closed meanwhile is logged: the broker redelivers.
 */
export function settle(
  context: ExecutionContext,
  options: ResolvedIdempotentOptions,
  how: 'ack' | 'requeue',
  logger: Pick<Logger, 'warn'>,
): boolean {
  if (!options.manualAck) return false;
  const rpc = context.getArgByIndex(1); // switchToRpc().getContext(), without its closures
  if (!(rpc instanceof RmqContext)) return false;
  const channel = rpc.getChannelRef();
  const message = rpc.getMessage();
  if (how === 'ack') {
    try {
      channel.ack(message);
    } catch (error) {
      // The channel closed (shutdown, broker restart): the broker redelivers the message, and the record skips it.
      logger.warn(`Could not acknowledge message: ${describeError(error)}; it will be redelivered and skipped.`);
    }
  } else {
    const timer = setTimeout(() => {
      try {
        channel.nack(message, false, true);
      } catch (error) {
        logger.warn(`Could not requeue message: ${describeError(error)}`);
      }
    }, options.retryAfter * 1000);
    timer.unref?.();
  }
  return true;
}

/** Whether the handler is a `@MessagePattern` (request-response: its caller waits for an answer). */
export function isMessagePattern(reflector: Reflector, context: ExecutionContext): boolean {
  return reflector.get<number | undefined>(PATTERN_HANDLER_METADATA, context.getHandler()) === 1;
}

/** What a `@MessagePattern` caller receives when the same message is being handled right now (it may retry). */
export function inFlightError(key: string): RpcException {
  return new RpcException({
    status: 'error',
    code: 'idempotency-key-in-use',
    message: `Message ${key} is being handled right now; retry later.`,
  });
}

/** Logs a skipped redelivery: a warning when its data differs from the handled message's, else a debug line. */
export function logDuplicate(
  logger: Pick<Logger, 'warn' | 'debug'>,
  record: StoredIdempotencyRecord,
  call: IdempotentCall,
): void {
  const { scope, key } = call;
  if (record.fingerprint !== call.fingerprint) {
    logger.warn(
      `${scope}: message ${key} was already handled with different data; the new data is ignored ` +
        '(the message id decides).',
    );
  } else {
    logger.debug(`${scope}: skipped message ${key}, already handled.`);
  }
}

/** Logs a message that arrived while the same message was in flight: requeued (debug line) or skipped (warning). */
export function logInFlight(logger: Pick<Logger, 'warn' | 'debug'>, call: IdempotentCall, requeued: boolean): void {
  const { scope, key, options } = call;
  if (requeued) {
    logger.debug(`${scope}: message ${key} is being handled right now; requeued in ${options.retryAfter} s.`);
  } else {
    logger.warn(`${scope}: message ${key} arrived again while its first delivery was still being handled; skipped.`);
  }
}

/** What identifies a message to `@Idempotent()`: its id (or the `key` option's value) and its data's fingerprint. */

/**
 * The message's key: the `key` option's value, else the outbox message id its transport carries (RabbitMQ
 * `messageId`, NATS/MQTT/Kafka headers, the envelope of TCP/Redis); undefined (or empty) when there is none.
 */
export function readMessageKey(
  context: ExecutionContext,
  data: unknown,
  options: ResolvedIdempotentOptions,
): string | undefined {
  return options.key ? options.key(data, context) : getOutboxMessageId(data, context.getArgByIndex(1));
}

/** The fingerprint every message nested too deeply gets (the message id decides). */
const TOO_DEEP_FINGERPRINT = 'data nested too deeply';

/**
 * The fingerprint of a message's data (or of the `fingerprint` option's value); for data nested more than
 * `MAX_JSON_DEPTH` levels deep, the fixed fingerprint of such data, after `tooDeep()` is called.
 */
export function fingerprintMessage(
  context: ExecutionContext,
  data: unknown,
  options: ResolvedIdempotentOptions,
  tooDeep: () => void,
): string {
  try {
    return fingerprintOf(options.fingerprint ? options.fingerprint(data, context) : data);
  } catch (error) {
    if (!(error instanceof JsonNestingTooDeepError)) throw error;
    tooDeep();
    return fingerprintOf(TOO_DEEP_FINGERPRINT);
  }
}
