import { Injectable } from '@nestjs/common';
import type { OutboxStats } from '../dialects/outbox-dialect';
import { OutboxService } from '../outbox/outbox.service';
import { describeError } from '../util/describe-error';

/** Limits past which the outbox reports itself `down`. A limit left out is reported but not checked. */
export interface OutboxHealthThresholds {
  /** Most pending messages (due, delayed or in flight). @default 10000 */
  maxBacklog?: number;
  /** Most age in milliseconds of the oldest pending message, on the database clock (the relay's lag). @default 300000 (5 minutes) */
  maxLagMs?: number;
  /**
   * Most dead messages. Unchecked by default: a dead message needs an operator, not a restart, so it should not
   * take a liveness or readiness probe down unless the app asks for it.
   * @default undefined (not checked)
   */
  maxDead?: number;
}

export const DEFAULT_OUTBOX_HEALTH_THRESHOLDS: Readonly<OutboxHealthThresholds> = Object.freeze({
  maxBacklog: 10_000,
  maxLagMs: 300_000,
});

/** What `OutboxHealthIndicator.isHealthy()` reports under its key (the shape of a `@nestjs/terminus` result). */
export interface OutboxHealthDetails extends OutboxStats {
  status: 'up' | 'down';
  /** Why the outbox is down: each exceeded limit, or the error of the stats query. */
  problems?: string[];
}

/**
 * A `@nestjs/terminus` health indicator for the outbox: backlog, lag of the oldest pending message and dead
 * count (one indexed query, `OutboxService.stats()`), compared with `thresholds`. Provided and exported by
 * `OutboxModule`; it returns terminus's result shape and does not import `@nestjs/terminus` itself.
 *
 * ```ts
 * @Get('health') @HealthCheck()
 * check() { return this.health.check([() => this.outboxHealth.isHealthy('outbox', { maxLagMs: 60_000 })]); }
 * ```
 */
@Injectable()
export class OutboxHealthIndicator {
  constructor(protected readonly outbox: OutboxService) {}

  async isHealthy<const Key extends string = 'outbox'>(
    key: Key = 'outbox' as Key,
    thresholds: OutboxHealthThresholds = {},
  ): Promise<Record<Key, OutboxHealthDetails>> {
    const limits = { ...DEFAULT_OUTBOX_HEALTH_THRESHOLDS, ...thresholds };
    let stats: OutboxStats;
    try {
      stats = await this.outbox.stats();
    } catch (error) {
      const empty: OutboxStats = { pending: 0, due: 0, inFlight: 0, dead: 0, oldestPendingAgeMs: 0 };
      return {
        [key]: { status: 'down', ...empty, problems: [`stats query failed: ${describeError(error)}`] },
      } as Record<Key, OutboxHealthDetails>;
    }
    const problems = this.problems(stats, limits);
    const details: OutboxHealthDetails = { status: problems.length > 0 ? 'down' : 'up', ...stats };
    if (problems.length > 0) details.problems = problems;
    return { [key]: details } as Record<Key, OutboxHealthDetails>;
  }

  /** The exceeded limits, in words. Override to add checks of your own. */
  protected problems(stats: OutboxStats, limits: OutboxHealthThresholds): string[] {
    const problems: string[] = [];
    if (limits.maxBacklog !== undefined && stats.pending > limits.maxBacklog) {
      problems.push(`backlog ${stats.pending} > maxBacklog ${limits.maxBacklog}`);
    }
    if (limits.maxLagMs !== undefined && stats.oldestPendingAgeMs > limits.maxLagMs) {
      problems.push(`oldest pending message is ${stats.oldestPendingAgeMs} ms old > maxLagMs ${limits.maxLagMs}`);
    }
    if (limits.maxDead !== undefined && stats.dead > limits.maxDead) {
      problems.push(`dead ${stats.dead} > maxDead ${limits.maxDead}`);
    }
    return problems;
  }
}
