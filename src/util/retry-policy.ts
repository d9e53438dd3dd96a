import { OutboxHandlerFailedError, OutboxNonRetryableError } from '../errors';
import type {
  OutboxRetryMessage,
  ResolvedConsumerRetry,
  ResolvedOutboxRetry,
  ResolvedPatternPolicy,
  ResolvedRetryPolicy,
} from '../retry.options';

/*
 * Per-pattern retry policies (`retry.patterns`): which glob a message pattern takes its policy from, and whether a
 * failed attempt is retried (`maxAttempts`, `retryIf`, `OutboxNonRetryableError`).
 */

/** Compiled globs, by glob text (a module has few; each is compiled once). */
const compiled = new Map<string, RegExp>();

/**
 * The regular expression of a glob: `**` any run of characters, `*` any run without a segment separator (`.` or
 * `/`), anything else itself.
 */
export function globRegExp(glob: string): RegExp {
  let found = compiled.get(glob);
  if (found) return found;
  let source = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === '*' && glob[i + 1] === '*') {
      source += '.*';
      while (glob[i + 1] === '*') i++;
    } else if (c === '*') source += '[^./]*';
    else source += c.replace(/[\\^$.|?+()[\]{}-]/g, '\\$&');
  }
  found = new RegExp(`^${source}$`, 's');
  compiled.set(glob, found);
  return found;
}

/** True when `pattern` matches `glob` (see `globRegExp()`). */
export function globMatches(glob: string, pattern: string): boolean {
  return globRegExp(glob).test(pattern);
}

/**
 * Orders pattern policies most specific first: a glob without wildcard, then the most literal characters, then
 * the fewest `**`; ties keep their declared order (the sort is stable).
 */
export function bySpecificity<T extends { glob: string }>(entries: readonly T[]): T[] {
  const rank = (glob: string) => {
    const wildcard = glob.includes('*');
    const literal = glob.replace(/\*/g, '').length;
    const across = (glob.match(/\*\*+/g) ?? []).length;
    return { wildcard, literal, across };
  };
  return [...entries].sort((a, b) => {
    const x = rank(a.glob);
    const y = rank(b.glob);
    if (x.wildcard !== y.wildcard) return x.wildcard ? 1 : -1;
    if (x.literal !== y.literal) return y.literal - x.literal;
    return x.across - y.across;
  });
}

/** The policy of `pattern`: the most specific matching entry's of `retry.patterns`, else `retry`'s own. */
export function policyFor(retry: ResolvedOutboxRetry | ResolvedConsumerRetry, pattern: string): ResolvedRetryPolicy {
  const entry: ResolvedPatternPolicy | undefined = retry.patterns?.find((p) => globMatches(p.glob, pattern));
  return entry ? entry.policy : retry;
}

/** The longest `maxDelay` of a retry and its pattern policies (a broker's deduplication window must cover it). */
export function longestDelay(retry: ResolvedOutboxRetry | ResolvedConsumerRetry): number {
  return Math.max(retry.maxDelay, ...(retry.patterns ?? []).map((p) => p.policy.maxDelay));
}

/** The error `retryIf` is given: what a handler or consumer threw, not the library's wrapper around it. */
export function appErrorOf(error: unknown): unknown {
  return error instanceof OutboxHandlerFailedError ? error.cause : error;
}

/**
 * Whether a failed attempt (`attempt`, 1 for the first) ends its message: `OutboxNonRetryableError`, `maxAttempts`
 * reached, or `retryIf` answering false (a `retryIf` that throws counts as true). `message` is read only when
 * `retryIf` is called.
 */
export function isFinalFailure(
  policy: ResolvedRetryPolicy,
  error: unknown,
  attempt: number,
  message: () => OutboxRetryMessage,
): boolean {
  const own = appErrorOf(error);
  if (error instanceof OutboxNonRetryableError || own instanceof OutboxNonRetryableError) return true;
  if (attempt >= policy.maxAttempts) return true;
  if (!policy.retryIf) return false;
  try {
    return policy.retryIf(own, attempt, message()) === false;
  } catch {
    return false;
  }
}

/** The message of an outbox row as `retryIf` is told of it. */
export function retryMessageOf(row: {
  messageId: string;
  pattern: string;
  key: string | null;
  destination: string;
  payload: string;
  headers: string | null;
}): OutboxRetryMessage {
  const parse = (text: string | null, fallback: unknown) => {
    if (text === null) return fallback;
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return fallback;
    }
  };
  const { messageId, pattern, key, destination } = row;
  const headers = parse(row.headers, {}) as Record<string, string>;
  return { messageId, pattern, key, destination, payload: parse(row.payload, null), headers };
}
