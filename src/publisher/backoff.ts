import type { ResolvedRetryBackoff } from '../retry.options';

/**
 * Delay before the next attempt after `attempts` attempts have been made: `initialDelay * factor^(attempts-1)`,
 * capped at `maxDelay`, with ± `jitter` of it randomized.
 */
export function retryDelay(
  attempts: number,
  retry: Pick<ResolvedRetryBackoff, 'initialDelay' | 'factor' | 'maxDelay' | 'jitter'>,
  random: () => number = Math.random,
): number {
  const exponent = Math.max(0, attempts - 1);
  const base = Math.min(retry.maxDelay, retry.initialDelay * Math.pow(retry.factor, exponent));
  const spread = base * retry.jitter;
  const delay = base - spread + random() * 2 * spread;
  return Math.max(0, Math.min(retry.maxDelay, Math.round(delay)));
}
