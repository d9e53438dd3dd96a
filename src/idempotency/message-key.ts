import type { ExecutionContext } from '@nestjs/common';
import { getOutboxMessageId } from '../transports/incoming-message-id';
import { fingerprintOf } from './fingerprint';
import type { ResolvedIdempotentOptions } from './idempotent-call.types';
import { JsonNestingTooDeepError } from './stable-json';

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
