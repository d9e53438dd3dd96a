import type { ChildApp } from './child-app';
import { randomBetween, sleep } from './produce';

export interface KillLoopOptions {
  /** Kill at least this many times. */
  minKills: number;
  /** Random life span of each incarnation after it is ready, in ms. */
  lifeMs: [number, number];
  /** Keep killing (after `minKills`) until this returns true, e.g. "the producer is done". */
  until?: () => boolean | Promise<boolean>;
  /** Called after each restart. */
  onRestart?: () => void;
}

/**
 * Lets `child` run for a random time, SIGKILLs it, starts it again; repeats. Resolves with the child running
 * (its last incarnation is left alive to finish the work).
 */
export async function killRepeatedly(child: ChildApp, options: KillLoopOptions): Promise<void> {
  if (!child.running) await child.start();
  const before = child.kills;
  while (child.kills - before < options.minKills || (options.until && !(await options.until()))) {
    await sleep(randomBetween(...options.lifeMs));
    if (!child.running) throw new Error(`${child.name} exited by itself instead of being killed\n${child.tail()}`);
    await child.kill();
    await child.start();
    options.onRestart?.();
  }
}
