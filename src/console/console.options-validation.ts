import { OutboxConfigurationError, OutboxConsoleUnguardedError } from '../errors';
import { DEFAULT_CONSOLE_OPTIONS, OutboxConsoleOptions, ResolvedOutboxConsoleOptions } from './console.options';

const KNOWN = ['path', 'guard', 'allowUnguarded', 'sampleInterval', 'window', 'showStoredResponses'];
const SEGMENT = /^[A-Za-z0-9._-]+$/;

function fail(option: string, problem: string, fix: string): never {
  throw new OutboxConfigurationError(`OutboxConsoleModule option \`${option}\` ${problem}. ${fix}`);
}

function integerIn(option: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    fail(option, `must be an integer from ${min} to ${max}, got ${String(value)}`, `Leave it out for ${fallback}.`);
  }
  return value;
}

function checkPath(value: unknown): string {
  if (value === undefined) return DEFAULT_CONSOLE_OPTIONS.path;
  const path = typeof value === 'string' ? value.replace(/^\/+|\/+$/g, '') : '';
  const segments = path.split('/');
  if (path.length === 0 || segments.some((s) => !SEGMENT.test(s) || s === '.' || s === '..')) {
    fail(
      'path',
      `must be a URL path such as 'outbox-console' or 'ops/outbox', got ${JSON.stringify(value)}`,
      'Use segments of letters, digits, -, _ and . separated by /.',
    );
  }
  return path;
}

function isGuard(value: unknown): boolean {
  if (typeof value === 'function')
    return typeof (value.prototype as { canActivate?: unknown })?.canActivate === 'function';
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { canActivate?: unknown }).canActivate === 'function'
  );
}

/**
 * Checks the options of `OutboxConsoleModule.forRoot()` and applies the defaults. Throws
 * `OutboxConfigurationError` for a bad value, and `OutboxConsoleUnguardedError` when there is no guard and
 * `allowUnguarded` is not `true`.
 */
export function resolveConsoleOptions(options: OutboxConsoleOptions | undefined): ResolvedOutboxConsoleOptions {
  if (options !== undefined && (typeof options !== 'object' || options === null || Array.isArray(options))) {
    throw new OutboxConfigurationError(
      'OutboxConsoleModule.forRoot() takes an options object, e.g. { guard: OperatorGuard }.',
    );
  }
  const raw = (options ?? {}) as Record<string, unknown>;
  for (const key of Object.keys(raw)) {
    if (!KNOWN.includes(key))
      fail(key, 'is not a known option', `Known options: ${KNOWN.join(', ')}. Check the spelling.`);
  }
  const allowUnguarded = raw.allowUnguarded ?? DEFAULT_CONSOLE_OPTIONS.allowUnguarded;
  if (typeof allowUnguarded !== 'boolean') {
    fail('allowUnguarded', `must be true or false, got ${String(allowUnguarded)}`, 'Leave it out for false.');
  }
  if (raw.guard !== undefined && !isGuard(raw.guard)) {
    fail(
      'guard',
      'must be a CanActivate class or instance (with a canActivate() method)',
      'Pass e.g. `guard: OperatorGuard` where OperatorGuard implements CanActivate.',
    );
  }
  if (raw.guard === undefined && !allowUnguarded) {
    throw new OutboxConsoleUnguardedError(
      'OutboxConsoleModule.forRoot() was given no `guard`: the console shows messages and can requeue and purge ' +
        'them, so it is not mounted without one. Fix: pass `guard: YourOperatorGuard` (a CanActivate class or ' +
        "instance checking the operator's credentials), or `allowUnguarded: true` if a proxy in front of the app " +
        'already protects the path.',
    );
  }
  const showStoredResponses = raw.showStoredResponses ?? DEFAULT_CONSOLE_OPTIONS.showStoredResponses;
  if (typeof showStoredResponses !== 'boolean') {
    fail('showStoredResponses', `must be true or false, got ${String(showStoredResponses)}`, 'Leave it out for false.');
  }
  const sampleInterval = integerIn(
    'sampleInterval',
    raw.sampleInterval,
    DEFAULT_CONSOLE_OPTIONS.sampleInterval,
    250,
    60_000,
  );
  return {
    path: checkPath(raw.path),
    guard: raw.guard as ResolvedOutboxConsoleOptions['guard'],
    allowUnguarded,
    sampleInterval,
    window: integerIn('window', raw.window, DEFAULT_CONSOLE_OPTIONS.window, 1, 1440),
    showStoredResponses,
  };
}
