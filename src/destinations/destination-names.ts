import type { InjectionToken } from '@nestjs/common';
import { sha256Hex } from '../util/sha256';
import { tokenName } from './route.options-validation';

/*
 * What the `destination` column of an outbox row holds. One message is written as one row per destination, all
 * with the message's id; each row is claimed, retried, dead-lettered and requeued on its own, and a key's order
 * holds per (key, destination).
 *
 * - `''`: every destination of the message, decided when the row is published (the one row of a message that has
 *   a single destination in an outbox without `route`, of a message with no destination when written, and of every
 *   row written before the `AddOutboxDestinations1765497600000` migration). Its delivery succeeds only when all of
 *   them did, as in earlier versions; in key order it waits for, and holds back, every destination of its key.
 * - `broker:<token>`: the broker of that `ClientsModule` token (its name: the string, or a class's or symbol's).
 * - `handler:<name>`: the `@OnOutboxEvent()` handler of that name (for the row's pattern).
 * - `consumer:<name>`: an inbox row, a message whose `@Idempotent({ retry })` broker consumer `<name>`
 *   (`ControllerName.methodName`) failed; `consumer:<name>#<hash>` when its records' scope is not the consumer's name.
 */

/** The destination of a row delivered to all of its message's destinations, decided at publish time. */
export const ALL_DESTINATIONS = '';

const BROKER = 'broker:';
const HANDLER = 'handler:';
const CONSUMER = 'consumer:';

/** The destination value of the broker of `token`. */
export function brokerDestination(token: InjectionToken): string {
  return `${BROKER}${tokenName(token)}`;
}

/** The destination value of the `@OnOutboxEvent()` handler named `name`. */
export function handlerDestination(name: string): string {
  return `${HANDLER}${name}`;
}

/**
 * The destination value of the inbox rows of the broker consumer `consumer` whose records are in `scope`: one row per
 * (scope, message id), as the records are.
 */
export function consumerDestination(consumer: string, scope: string): string {
  return scope === consumer ? `${CONSUMER}${consumer}` : `${CONSUMER}${consumer}#${sha256Hex(scope).slice(0, 16)}`;
}

/** What a destination value names. */
export type ParsedDestination =
  | { kind: 'all' }
  | { kind: 'broker'; name: string }
  | { kind: 'handler'; name: string }
  | { kind: 'consumer'; name: string }
  | { kind: 'unknown'; value: string };

/** Reads a destination value back. */
export function parseDestination(value: string): ParsedDestination {
  if (value === ALL_DESTINATIONS) return { kind: 'all' };
  if (value.startsWith(BROKER)) return { kind: 'broker', name: value.slice(BROKER.length) };
  if (value.startsWith(HANDLER)) return { kind: 'handler', name: value.slice(HANDLER.length) };
  if (value.startsWith(CONSUMER)) return { kind: 'consumer', name: value.slice(CONSUMER.length).split('#')[0] };
  return { kind: 'unknown', value };
}
