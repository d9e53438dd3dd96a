import type { InjectionToken } from '@nestjs/common';
import { OutboxConfigurationError } from '../errors';
import type { OutboxRoute } from './outbox-route.types';

function fail(path: string, problem: string, fix: string): never {
  throw new OutboxConfigurationError(`OutboxModule option \`${path}\` ${problem}. ${fix}`);
}

/** True for a usable injection token: a non-empty string, a symbol or a class. */
export function isInjectionToken(value: unknown): value is InjectionToken {
  return typeof value === 'string' ? value.length > 0 : typeof value === 'symbol' || typeof value === 'function';
}

/** The printable name of a token (a class by its name). */
export function tokenName(token: InjectionToken): string {
  return typeof token === 'function' ? token.name : String(token);
}

/**
 * Checks the `route` option (its shape only: whether each client exists is checked when the app starts) and that
 * it is not given together with `client`. Throws `OutboxConfigurationError` naming the fix.
 */
export function checkRoute(value: unknown, client: unknown): OutboxRoute | undefined {
  if (value === undefined) return undefined;
  if (client !== undefined) {
    fail(
      'route',
      'cannot be given together with `client`',
      'Keep one: `client: TOKEN` for a single broker, or `route: { clients: [A, B], select }` and list that token in `clients`.',
    );
  }
  const fix =
    "Pass `route: { clients: ['ORDERS_RMQ', 'AUDIT_NATS'], select: (message) => 'ORDERS_RMQ' }`, listing every token select() may return.";
  if (typeof value !== 'object' || value === null) fail('route', `must be an object, got ${typeof value}`, fix);
  const { clients, select, ...rest } = value as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) fail(`route.${unknown[0]}`, 'is not a known option (known: clients, select)', fix);
  if (!Array.isArray(clients) || clients.length === 0) {
    fail('route.clients', 'must be a non-empty array of injection tokens', fix);
  }
  const bad = clients.findIndex((token) => !isInjectionToken(token));
  if (bad >= 0) fail(`route.clients[${bad}]`, 'must be an injection token (string, symbol or class)', fix);
  if (new Set(clients).size !== clients.length) {
    fail('route.clients', 'lists a token twice', 'List each ClientProxy token once.');
  }
  if (typeof select !== 'function') fail('route.select', `must be a function, got ${typeof select}`, fix);
  return { clients: [...clients] as InjectionToken[], select: select as OutboxRoute['select'] };
}
