import { OutboxConfigurationError } from './errors';
import { resolveIdempotencyDefaults } from './idempotency/idempotency.options-validation';
import { isUriReference } from './util/uri-reference';
import { resolveRetryOptions } from './retry.options-validation';
import { resolveCircuitBreaker } from './publisher/circuit-breaker.options';
import { checkRoute, isInjectionToken } from './destinations/route.options-validation';
import {
  DEFAULT_CLEANUP_OPTIONS,
  DEFAULT_PUBLISHER_OPTIONS,
  DEFAULT_RETRY_OPTIONS,
  OutboxMeterProviderLike,
  OutboxModuleOptions,
  OutboxTransportName,
  ResolvedOutboxOptions,
} from './outbox.options';

const TRANSPORTS: ReadonlyArray<OutboxTransportName | 'auto'> = [
  'auto',
  'rmq',
  'tcp',
  'nats',
  'mqtt',
  'redis',
  'kafka',
];

function fail(path: string, problem: string, fix: string): never {
  throw new OutboxConfigurationError(`OutboxModule option \`${path}\` ${problem}. ${fix}`);
}

function describe(value: unknown): string {
  if (typeof value === 'string') return `the string ${JSON.stringify(value)}`;
  if (value === null) return 'null';
  return `${typeof value} ${String(value)}`;
}

function checkObject(path: string, value: unknown): Record<string, unknown> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    fail(path, `must be an object, got ${describe(value)}`, `Pass an object such as \`${path}: {}\` or leave it out.`);
  }
  return value as Record<string, unknown>;
}

function checkKnownKeys(path: string, value: Record<string, unknown>, known: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      const where = path ? `${path}.${key}` : key;
      fail(where, 'is not a known option', `Known options here: ${known.join(', ')}. Check the spelling.`);
    }
  }
}

function checkBoolean(path: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') {
    fail(
      path,
      `must be a boolean, got ${describe(value)}`,
      `Pass \`true\` or \`false\` (not a string); convert environment variables before passing them.`,
    );
  }
  return value;
}

function checkNumber(
  path: string,
  value: unknown,
  fallback: number,
  { min, max, integer }: { min: number; max?: number; integer?: boolean },
): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    fail(
      path,
      `must be a finite number, got ${describe(value)}`,
      `Pass a number such as ${fallback} (the default); convert environment variables with Number().`,
    );
  }
  if (integer && !Number.isInteger(value))
    fail(path, `must be an integer, got ${value}`, `Pass a whole number such as ${fallback}.`);
  if (value < min || (max !== undefined && value > max)) {
    const range = max === undefined ? `at least ${min}` : `between ${min} and ${max}`;
    fail(path, `must be ${range}, got ${value}`, `Pass a value ${range}; the default is ${fallback}.`);
  }
  return value;
}

/**
 * Validates the options given to `OutboxModule` and applies the defaults. Throws `OutboxConfigurationError`
 * naming the option and the fix.
 */
export function resolveOutboxOptions(input: OutboxModuleOptions | undefined): ResolvedOutboxOptions {
  const raw = checkObject('options', input ?? {});
  checkKnownKeys('', raw, [
    'client',
    'route',
    'transport',
    'publisher',
    'retry',
    'cleanup',
    'idempotency',
    'deadLetters',
    'transactions',
    'schemaCheck',
    'metrics',
    'cloudEvents',
  ]);
  const pub = checkObject('publisher', raw.publisher);
  checkKnownKeys('publisher', pub, Object.keys(DEFAULT_PUBLISHER_OPTIONS));
  const clean = checkObject('cleanup', raw.cleanup);
  checkKnownKeys('cleanup', clean, Object.keys(DEFAULT_CLEANUP_OPTIONS));
  const d = DEFAULT_PUBLISHER_OPTIONS;
  const r = DEFAULT_RETRY_OPTIONS;

  const publisher = {
    enabled: checkBoolean('publisher.enabled', pub.enabled, d.enabled),
    pollingInterval: checkNumber('publisher.pollingInterval', pub.pollingInterval, d.pollingInterval, {
      min: 10,
      integer: true,
    }),
    batchSize: checkNumber('publisher.batchSize', pub.batchSize, d.batchSize, { min: 1, max: 10_000, integer: true }),
    publishTimeout: checkNumber('publisher.publishTimeout', pub.publishTimeout, d.publishTimeout, {
      min: 10,
      integer: true,
    }),
    maxConfirmWait: checkNumber('publisher.maxConfirmWait', pub.maxConfirmWait, d.maxConfirmWait, {
      min: 10,
      integer: true,
    }),
    leaseDuration: checkNumber('publisher.leaseDuration', pub.leaseDuration, d.leaseDuration, {
      min: 1000,
      integer: true,
    }),
    notify: checkBoolean('publisher.notify', pub.notify, d.notify),
    maxBatchesInFlight: checkNumber('publisher.maxBatchesInFlight', pub.maxBatchesInFlight, d.maxBatchesInFlight, {
      min: 1,
      max: 64,
      integer: true,
    }),
    instanceId: checkInstanceId(pub.instanceId, d.instanceId),
    onExpired: checkOnExpired(pub.onExpired, d.onExpired),
    mode: checkMode(pub.mode, d.mode),
    walHandoff: checkNumber('publisher.walHandoff', pub.walHandoff, d.walHandoff, { min: 1000, integer: true }),
    circuitBreaker: resolveCircuitBreaker(pub.circuitBreaker),
  };
  // Not given, the publish timeout follows a lease that is: a third of it, as the defaults (10 s of 30 s), so a short
  // lease alone is enough; never above the default, so a long lease does not make a late confirm take longer to see.
  const derivedTimeout = pub.publishTimeout === undefined && pub.leaseDuration !== undefined;
  if (derivedTimeout) {
    publisher.publishTimeout = Math.min(d.publishTimeout, Math.floor(publisher.leaseDuration / 3));
  }
  if (pub.maxConfirmWait === undefined)
    publisher.maxConfirmWait = Math.max(publisher.maxConfirmWait, publisher.publishTimeout);
  if (publisher.maxConfirmWait < publisher.publishTimeout) {
    fail(
      'publisher.maxConfirmWait',
      `(${publisher.maxConfirmWait} ms) must be at least publisher.publishTimeout (${publisher.publishTimeout} ms)`,
      'Raise maxConfirmWait or lower publishTimeout: a confirm is late only after publishTimeout.',
    );
  }
  if (pub.leaseDuration === undefined && publisher.leaseDuration < publisher.publishTimeout + 1000) {
    publisher.leaseDuration = publisher.publishTimeout * 2 + 1000;
  }
  if (publisher.leaseDuration < publisher.publishTimeout + 1000) {
    const timeout = derivedTimeout ? 'ms, a third of leaseDuration as publishTimeout is not set' : 'ms';
    fail(
      'publisher.leaseDuration',
      `(${publisher.leaseDuration} ms) must exceed publisher.publishTimeout (${publisher.publishTimeout} ${timeout}) by at least 1000 ms`,
      derivedTimeout
        ? 'Raise leaseDuration to at least 1500 ms, or set a shorter publishTimeout.'
        : 'Raise leaseDuration or lower publishTimeout, so no publish can outlive the claim that allowed it.',
    );
  }

  const retryKeys = [
    ...(Object.keys(DEFAULT_RETRY_OPTIONS) as Array<keyof typeof DEFAULT_RETRY_OPTIONS>),
    'retryIf',
    'patterns',
  ] as const;
  const retryOptions = resolveRetryOptions({ prefix: 'OutboxModule option', path: 'retry' }, raw.retry, r, retryKeys);

  const c = DEFAULT_CLEANUP_OPTIONS;
  const cleanup = {
    enabled: checkBoolean('cleanup.enabled', clean.enabled, c.enabled),
    deleteOnPublish: checkBoolean('cleanup.deleteOnPublish', clean.deleteOnPublish, c.deleteOnPublish),
    retention: checkNumber('cleanup.retention', clean.retention, c.retention, { min: 0, integer: true }),
    interval: checkNumber('cleanup.interval', clean.interval, c.interval, { min: 100, integer: true }),
    batchSize: checkNumber('cleanup.batchSize', clean.batchSize, c.batchSize, { min: 1, max: 100_000, integer: true }),
  };

  const transport = raw.transport ?? 'auto';
  if (!TRANSPORTS.includes(transport as OutboxTransportName)) {
    fail(
      'transport',
      `must be one of ${TRANSPORTS.join(', ')}, got ${describe(transport)}`,
      "Leave it out to detect the transport from the client, or name it, e.g. 'rmq'.",
    );
  }

  const client = raw.client as ResolvedOutboxOptions['client'];
  // A missing client is checked when the app starts: in-process @OnOutboxEvent() handlers may be the only destination.
  if (publisher.enabled && client !== undefined && !isInjectionToken(client)) {
    fail(
      'client',
      `must be an injection token (string, symbol or class), got ${describe(client)}`,
      "Register a ClientProxy with ClientsModule.register([{ name: 'BROKER', transport: Transport.RMQ, options }]) and pass `client: 'BROKER'`, or set `publisher: { enabled: false }` in processes that do not publish.",
    );
  }
  const route = checkRoute(raw.route, client);

  const transactions = checkTransactions(raw.transactions);
  const dead = checkObject('deadLetters', raw.deadLetters);
  checkKnownKeys('deadLetters', dead, ['allowEdit']);
  const deadLetters = { allowEdit: checkBoolean('deadLetters.allowEdit', dead.allowEdit, false) };
  const schemaCheck = checkBoolean('schemaCheck', raw.schemaCheck, true);
  const metrics = checkMetrics(raw.metrics);

  return {
    client,
    ...(route ? { route } : {}),
    transport: transport as ResolvedOutboxOptions['transport'],
    publisher,
    retry: retryOptions,
    cleanup,
    idempotency: resolveIdempotencyDefaults(raw.idempotency),
    deadLetters,
    transactions,
    schemaCheck,
    metrics,
    cloudEvents: checkCloudEvents(raw.cloudEvents),
  };
}

function checkCloudEvents(value: unknown): ResolvedOutboxOptions['cloudEvents'] {
  if (value === undefined || value === false) return false;
  const options = checkObject('cloudEvents', value);
  checkKnownKeys('cloudEvents', options, ['source']);
  if (!isUriReference(options.source)) {
    fail(
      'cloudEvents.source',
      `must be a URI-reference naming the producer, got ${describe(options.source)}`,
      "Pass e.g. { source: 'urn:acme:orders' } or { source: '/orders' }, or cloudEvents: false to turn them off.",
    );
  }
  return { source: options.source };
}

function checkMetrics(value: unknown): ResolvedOutboxOptions['metrics'] {
  if (value === undefined || typeof value === 'boolean') return { enabled: value ?? true };
  const options = checkObject('metrics', value);
  checkKnownKeys('metrics', options, ['enabled', 'meterProvider']);
  const enabled = checkBoolean('metrics.enabled', options.enabled, true);
  const provider = options.meterProvider as { getMeter?: unknown } | undefined;
  if (provider !== undefined && typeof provider?.getMeter !== 'function') {
    fail(
      'metrics.meterProvider',
      `must be an OpenTelemetry MeterProvider (with getMeter()), got ${describe(provider)}`,
      'Pass the MeterProvider of @opentelemetry/sdk-metrics, or leave it out to use the global one.',
    );
  }
  return provider ? { enabled, meterProvider: provider as OutboxMeterProviderLike } : { enabled };
}

function checkTransactions(value: unknown): ResolvedOutboxOptions['transactions'] {
  if (value === undefined) return 'builtin';
  if (value === 'builtin' || value === 'cls') return value;
  const source = value as { current?: unknown; run?: unknown };
  if (
    typeof value === 'object' &&
    value !== null &&
    typeof source.current === 'function' &&
    typeof source.run === 'function'
  ) {
    return value as ResolvedOutboxOptions['transactions'];
  }
  fail(
    'transactions',
    `must be 'builtin', 'cls' or an OutboxTransactionSource (an object with current() and run()), got ${describe(value)}`,
    "Leave it out for the built-in transactions, or pass 'cls' to join @nestjs-cls/transactional's TransactionHost.",
  );
}

/** `publisher.onExpired`: `'dead'` or `'drop'`. */
/** `publisher.mode`: `'poll'`, `'wal'` or `'wal-or-poll'`. */
function checkMode(value: unknown, fallback: 'poll' | 'wal' | 'wal-or-poll'): 'poll' | 'wal' | 'wal-or-poll' {
  if (value === undefined) return fallback;
  if (value !== 'poll' && value !== 'wal' && value !== 'wal-or-poll') {
    fail(
      'publisher.mode',
      `must be 'poll', 'wal' or 'wal-or-poll', got ${describe(value)}`,
      "Leave it out for polling, or pass 'wal' / 'wal-or-poll' on PostgreSQL (see docs/wal-relay.md).",
    );
  }
  return value;
}

function checkOnExpired(value: unknown, fallback: 'dead' | 'drop'): 'dead' | 'drop' {
  if (value === undefined) return fallback;
  if (value !== 'dead' && value !== 'drop') {
    fail(
      'publisher.onExpired',
      `must be 'dead' or 'drop', got ${describe(value)}`,
      "Pass 'dead' to keep expired messages as dead letters, 'drop' to delete them, or leave it out for 'dead'.",
    );
  }
  return value;
}

/** `publisher.instanceId`: a non-empty string of at most 255 characters (the column's size). */
function checkInstanceId(value: unknown, fallback: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || value.length === 0 || value.length > 255) {
    fail(
      'publisher.instanceId',
      `must be a non-empty string of at most 255 characters, got ${describe(value)}`,
      `Pass a short name of this process (e.g. the pod name), or leave it out for hostname:pid ('${fallback}').`,
    );
  }
  return value as string;
}
