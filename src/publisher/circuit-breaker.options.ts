import { OutboxConfigurationError } from '../errors';

/**
 * `publisher.circuitBreaker`: a breaker per broker (each client of `client` / `route.clients`). After `failures`
 * consecutive failed publishes to one broker it opens: that broker's messages are not sent for `coolDown` ms — each
 * one claimed meanwhile is put back until the cool-down ends, its attempt given back (it never moves toward
 * `retry.maxAttempts`) — while the other brokers and the in-process handlers go on. Then it is half-open: one
 * publish goes through as a probe (the broker's other messages wait for its outcome); a success closes it, a failure
 * opens it for another `coolDown`. A failed publish is one the broker refused, nacked or did not confirm, or could
 * not be reached for; not a message its transport could not encode, nor `OutboxNonRetryableError`. The state is
 * kept in each process: with several relay replicas, each one opens and closes its own breakers. See
 * docs/dead-letters.md, "Circuit breaker".
 */
export interface OutboxCircuitBreakerOptions {
  /** Consecutive failed publishes to one broker that open its breaker. An integer from 1 to 1000. @default 5 */
  failures?: number;
  /** Milliseconds a broker's breaker stays open before one probe is let through. At least 100. @default 30000 */
  coolDown?: number;
}

/** The breaker's options after validation. */
export type ResolvedCircuitBreakerOptions = Readonly<Required<OutboxCircuitBreakerOptions>>;

export const DEFAULT_CIRCUIT_BREAKER_OPTIONS: ResolvedCircuitBreakerOptions = Object.freeze({
  failures: 5,
  coolDown: 30_000,
});

/** `publisher.circuitBreaker`: `false` (or absent) off, `true` the defaults, an object refines them. */
export function resolveCircuitBreaker(input: unknown): ResolvedCircuitBreakerOptions | false {
  const path = 'publisher.circuitBreaker';
  const fail = (field: string, problem: string, fix: string): never => {
    throw new OutboxConfigurationError(`OutboxModule option \`${path}${field}\` ${problem}. ${fix}`);
  };
  if (input === undefined || input === false) return false;
  if (input === true) return DEFAULT_CIRCUIT_BREAKER_OPTIONS;
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return fail(
      '',
      `must be a boolean or an object, got ${input === null ? 'null' : typeof input}`,
      'Pass `true` for the defaults, `{ failures: 5, coolDown: 30000 }`, or leave it out (off).',
    );
  }
  const raw = input as Record<string, unknown>;
  for (const key of Object.keys(raw)) {
    if (key !== 'failures' && key !== 'coolDown') {
      fail(`.${key}`, 'is not a known option', 'Known options here: failures, coolDown. Check the spelling.');
    }
  }
  const number = (key: 'failures' | 'coolDown', min: number, max: number): number => {
    const value = raw[key] ?? DEFAULT_CIRCUIT_BREAKER_OPTIONS[key];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      const got = typeof value === 'string' ? `the string ${JSON.stringify(value)}` : String(value);
      fail(
        `.${key}`,
        `must be an integer from ${min} to ${max}, got ${got}`,
        `Pass a whole number such as ${DEFAULT_CIRCUIT_BREAKER_OPTIONS[key]} (the default); convert environment variables with Number().`,
      );
    }
    return value as number;
  };
  return Object.freeze({ failures: number('failures', 1, 1000), coolDown: number('coolDown', 100, 86_400_000) });
}
