import { OutboxConfigurationError } from '../errors';
import { DEFAULT_RETRY_OPTIONS, type ResolvedConsumerRetry } from '../retry.options';
import { resolveRetryOptions } from '../retry.options-validation';
import { DEFAULT_IDEMPOTENCY_OPTIONS, IdempotencyDefaults, ResolvedIdempotencyDefaults } from './idempotency.options';

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function fail(path: string, problem: string, fix: string): never {
  throw new OutboxConfigurationError(`OutboxModule option \`idempotency.${path}\` ${problem}. ${fix}`);
}

/**
 * Validates `OutboxModule.forRoot({ idempotency })` (and, with `where`, the options of one `@Idempotent()`), and
 * applies the defaults. Throws `OutboxConfigurationError` naming the option and the fix.
 */
export function resolveIdempotencyDefaults(
  input: unknown,
  base: ResolvedIdempotencyDefaults = DEFAULT_IDEMPOTENCY_OPTIONS,
): ResolvedIdempotencyDefaults {
  if (input === undefined) return base;
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    fail(
      '',
      `must be an object, got ${input === null ? 'null' : typeof input}`,
      'Pass e.g. `idempotency: { ttl: 3600000 }` or leave it out.',
    );
  }
  const raw = input as IdempotencyDefaults & Record<string, unknown>;
  const known = Object.keys(DEFAULT_IDEMPOTENCY_OPTIONS);
  for (const key of Object.keys(raw)) {
    if (!known.includes(key))
      fail(key, 'is not a known option', `Known options here: ${known.join(', ')}. Check the spelling.`);
  }
  const header = raw.header ?? base.header;
  if (typeof header !== 'string' || !HEADER_NAME.test(header)) {
    fail(
      'header',
      `must be an HTTP header name, got ${JSON.stringify(header)}`,
      "Pass a name such as 'Idempotency-Key'.",
    );
  }
  const required = raw.required ?? base.required;
  if (typeof required !== 'boolean')
    fail('required', `must be a boolean, got ${typeof required}`, 'Pass true or false.');
  const maxKeyLength = raw.maxKeyLength ?? base.maxKeyLength;
  if (typeof maxKeyLength !== 'number' || !Number.isInteger(maxKeyLength) || maxKeyLength < 1 || maxKeyLength > 255) {
    fail(
      'maxKeyLength',
      `must be a whole number of characters from 1 to 255, got ${String(maxKeyLength)}`,
      'Pass e.g. 64, or leave it out for 255 (the size of the key column).',
    );
  }
  const ttl = raw.ttl ?? base.ttl;
  if (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < 1000) {
    fail(
      'ttl',
      `must be a whole number of milliseconds, at least 1000, got ${String(ttl)}`,
      'Pass e.g. 86400000 (24 hours, the default).',
    );
  }
  const retryAfter = raw.retryAfter ?? base.retryAfter;
  if (typeof retryAfter !== 'number' || !Number.isInteger(retryAfter) || retryAfter < 0) {
    fail(
      'retryAfter',
      `must be a whole number of seconds >= 0, got ${String(retryAfter)}`,
      'Pass e.g. 1 (the default).',
    );
  }
  const wholeMs = (name: 'connectionTimeout' | 'lockTimeout' | 'statementTimeout', example: number): number => {
    const value = raw[name] ?? base[name];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 2_147_483_647) {
      fail(name, `must be a whole number of milliseconds >= 1, got ${String(value)}`, `Pass e.g. ${example}.`);
    }
    return value;
  };
  const connectionTimeout = wholeMs('connectionTimeout', DEFAULT_IDEMPOTENCY_OPTIONS.connectionTimeout);
  const lockTimeout = wholeMs('lockTimeout', DEFAULT_IDEMPOTENCY_OPTIONS.lockTimeout);
  const statementTimeout = wholeMs('statementTimeout', DEFAULT_IDEMPOTENCY_OPTIONS.statementTimeout);
  if (statementTimeout <= lockTimeout) {
    fail(
      'statementTimeout',
      `must be greater than lockTimeout (${lockTimeout}), got ${statementTimeout}`,
      'A lock wait must end on the server (503 database-busy) before the client gives up on the connection: ' +
        `pass e.g. statementTimeout: ${lockTimeout + 3000}.`,
    );
  }
  const replayHeaders = raw.replayHeaders ?? base.replayHeaders;
  if (!Array.isArray(replayHeaders) || replayHeaders.some((h) => typeof h !== 'string' || !HEADER_NAME.test(h))) {
    fail('replayHeaders', 'must be an array of HTTP header names', "Pass e.g. ['location', 'etag'].");
  }
  const manualAck = raw.manualAck ?? base.manualAck;
  if (manualAck !== undefined && typeof manualAck !== 'boolean')
    fail(
      'manualAck',
      `must be a boolean, got ${typeof manualAck}`,
      "Leave it out (derived from the RabbitMQ consumer's noAck), or pass true for noAck: false consumers.",
    );
  const replayErrors = raw.replayErrors ?? base.replayErrors;
  if (typeof replayErrors !== 'boolean' && typeof replayErrors !== 'function') {
    const got = `must be a boolean or a function, got ${typeof replayErrors}`;
    fail('replayErrors', got, 'Pass true (the default policy), false, or (error) => boolean.');
  }
  return Object.freeze({
    retry: resolveConsumerRetry(raw.retry, base.retry),
    header,
    required,
    maxKeyLength,
    ttl,
    retryAfter,
    connectionTimeout,
    lockTimeout,
    statementTimeout,
    replayHeaders: Object.freeze(replayHeaders.map((h) => h.toLowerCase())) as string[],
    manualAck,
    replayErrors,
  });
}

const CONSUMER_RETRY_KEYS = [
  'maxAttempts',
  'initialDelay',
  'factor',
  'maxDelay',
  'jitter',
  'retryIf',
  'patterns',
] as const;

/** `idempotency.retry` (or `@Idempotent({ retry })`) over `base`: false, the base's (or default) retries, refined. */
function resolveConsumerRetry(input: unknown, base: ResolvedConsumerRetry | false): ResolvedConsumerRetry | false {
  if (input === undefined) return base;
  if (input === false) return false;
  const from = base || DEFAULT_RETRY_OPTIONS;
  if (input === true) input = {};
  const where = { prefix: 'OutboxModule option', path: 'idempotency.retry' };
  return Object.freeze(resolveRetryOptions(where, input, from, CONSUMER_RETRY_KEYS));
}
