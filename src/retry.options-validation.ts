import { OutboxConfigurationError } from './errors';
import { bySpecificity } from './util/retry-policy';
import {
  DEFAULT_RETRY_OPTIONS,
  type OutboxRetryOptions,
  type OutboxRetryPolicy,
  type ResolvedPatternPolicy,
  type ResolvedRetryBackoff,
  type ResolvedRetryPolicy,
} from './retry.options';

/** The numeric fields of a retry. */
type NumericKey = keyof typeof DEFAULT_RETRY_OPTIONS;

/** The fields of a `patterns` entry. */
const POLICY_KEYS = ['maxAttempts', 'initialDelay', 'factor', 'maxDelay', 'jitter', 'retryIf'] as const;

/** What a retry resolves to: its numeric fields, and `retryIf` / `patterns` when allowed and given. */
export type ResolvedRetryFields<K extends keyof OutboxRetryOptions> = Required<
  Pick<OutboxRetryOptions, K & NumericKey>
> & {
  retryIf?: ResolvedRetryPolicy['retryIf'];
  patterns?: readonly ResolvedPatternPolicy[];
};

/**
 * Validates a `retry` object — the module's `retry`, or a consumer's `idempotency.retry` / `@Idempotent({ retry })`
 * — over `base` (the defaults, or the options it refines). `where` names it in errors (`OutboxModule option
 * \`retry\``); `keys` are the fields allowed. Throws `OutboxConfigurationError` naming the option and the fix.
 */
export function resolveRetryOptions<K extends keyof OutboxRetryOptions>(
  where: { prefix: string; path: string },
  input: unknown,
  base: Readonly<Partial<ResolvedRetryFields<K>>>,
  keys: readonly K[],
): ResolvedRetryFields<K> {
  const fail = (field: string, problem: string, fix: string): never => {
    throw new OutboxConfigurationError(`${where.prefix} \`${where.path}.${field}\` ${problem}. ${fix}`);
  };
  if (input === undefined) input = {};
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new OutboxConfigurationError(
      `${where.prefix} \`${where.path}\` must be an object, got ${input === null ? 'null' : typeof input}. ` +
        `Pass an object such as \`${where.path}: { maxAttempts: 5 }\` or leave it out.`,
    );
  }
  const raw = input as Record<string, unknown>;
  for (const key of Object.keys(raw)) {
    if (!(keys as readonly string[]).includes(key))
      fail(key, 'is not a known option', `Known options here: ${keys.join(', ')}. Check the spelling.`);
  }
  const limits: Record<NumericKey, { min: number; max?: number; integer?: boolean }> = {
    maxAttempts: { min: 1, integer: true },
    initialDelay: { min: 0, integer: true },
    factor: { min: 1 },
    maxDelay: { min: 0, integer: true },
    jitter: { min: 0, max: 1 },
    historyLimit: { min: 0, max: 1000, integer: true },
  };
  const out = {} as Record<string, unknown>;
  for (const key of keys) {
    if (key === 'retryIf' || key === 'patterns') continue;
    const numeric = key as NumericKey;
    const value = raw[key];
    const fallback = (base as Record<string, number>)[key] ?? DEFAULT_RETRY_OPTIONS[numeric];
    if (value === undefined) {
      out[key] = fallback;
      continue;
    }
    const { min, max, integer } = limits[numeric];
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      const got =
        typeof value === 'string' ? `the string ${JSON.stringify(value)}` : `${typeof value} ${String(value)}`;
      fail(
        key,
        `must be a finite number, got ${got}`,
        `Pass a number such as ${fallback} (the default); convert environment variables with Number().`,
      );
    }
    const n = value as number;
    if (integer && !Number.isInteger(n))
      fail(key, `must be an integer, got ${n}`, `Pass a whole number such as ${fallback}.`);
    if (n < min || (max !== undefined && n > max)) {
      const range = max === undefined ? `at least ${min}` : `between ${min} and ${max}`;
      fail(key, `must be ${range}, got ${n}`, `Pass a value ${range}; the default is ${fallback}.`);
    }
    out[key] = n;
  }
  const resolved = out as ResolvedRetryFields<K> & Partial<ResolvedRetryBackoff>;
  if ((keys as readonly string[]).includes('retryIf')) {
    const retryIf = raw.retryIf === undefined ? base.retryIf : raw.retryIf;
    if (retryIf !== undefined && typeof retryIf !== 'function') {
      fail(
        'retryIf',
        `must be a function, got ${retryIf === null ? 'null' : typeof retryIf}`,
        'Pass `(error, attempt, message) => boolean` (false: dead at once), or leave it out.',
      );
    }
    if (retryIf !== undefined) resolved.retryIf = retryIf as ResolvedRetryPolicy['retryIf'];
  }
  checkDelays(resolved, where.path, fail);
  if ((keys as readonly string[]).includes('patterns')) {
    const patterns = resolvePatterns(where, raw.patterns, resolved as ResolvedRetryPolicy, base.patterns);
    if (patterns) resolved.patterns = patterns;
  }
  return resolved;
}

/** Fails when `maxDelay` is below `initialDelay`. */
function checkDelays(
  resolved: Partial<ResolvedRetryBackoff>,
  path: string,
  fail: (field: string, problem: string, fix: string) => never,
): void {
  if (
    resolved.maxDelay !== undefined &&
    resolved.initialDelay !== undefined &&
    resolved.maxDelay < resolved.initialDelay
  ) {
    fail(
      'maxDelay',
      `(${resolved.maxDelay}) is below ${path}.initialDelay (${resolved.initialDelay})`,
      'Make maxDelay at least initialDelay.',
    );
  }
}

/**
 * `patterns` over `parent` (the resolved retry they are in): each entry validated and resolved over it, `inherited`
 * entries (a module-wide retry's, refined by a consumer's) re-resolved over it unless the same glob is given again;
 * most specific first. Undefined when there are none.
 */
function resolvePatterns(
  where: { prefix: string; path: string },
  input: unknown,
  parent: ResolvedRetryPolicy,
  inherited: readonly ResolvedPatternPolicy[] | undefined,
): readonly ResolvedPatternPolicy[] | undefined {
  const path = `${where.path}.patterns`;
  if (input !== undefined && (typeof input !== 'object' || input === null || Array.isArray(input))) {
    throw new OutboxConfigurationError(
      `${where.prefix} \`${path}\` must be an object of glob → policy, got ` +
        `${input === null ? 'null' : Array.isArray(input) ? 'an array' : typeof input}. ` +
        "Pass e.g. `patterns: { 'audit.*': { maxAttempts: 2 } }`, or leave it out.",
    );
  }
  const given = Object.entries((input ?? {}) as Record<string, unknown>);
  const entries = new Map<string, OutboxRetryPolicy>();
  for (const entry of inherited ?? []) entries.set(entry.glob, entry.own);
  for (const [glob, own] of given) {
    if (glob.trim() === '' || glob.length > 255) {
      throw new OutboxConfigurationError(
        `${where.prefix} \`${path}\` has a glob of ${glob.length} characters${glob.trim() === '' ? ' (blank)' : ''}. ` +
          "Name a message pattern or a glob of one, such as 'audit.*', of 1 to 255 characters.",
      );
    }
    entries.set(glob, own as OutboxRetryPolicy);
  }
  if (entries.size === 0) return undefined;
  const resolved: ResolvedPatternPolicy[] = [];
  for (const [glob, own] of entries) {
    const at = { prefix: where.prefix, path: `${path}[${JSON.stringify(glob)}]` };
    const policy = resolveRetryOptions(at, own, parent, POLICY_KEYS) as ResolvedRetryPolicy;
    resolved.push({ glob, own: Object.freeze({ ...own }), policy: Object.freeze(policy) });
  }
  return Object.freeze(bySpecificity(resolved));
}
