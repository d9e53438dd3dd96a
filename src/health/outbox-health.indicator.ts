import { Inject, Injectable, Optional } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import type { OutboxStats } from '../dialects/outbox-dialect';
import { OutboxConfigurationError } from '../errors';
import { isDefaultDataSource } from '../outbox.constants';
import { findOutboxes } from '../outbox/outbox-directory';
import { OutboxService } from '../outbox/outbox.service';
import { isDatabaseBusy } from '../dialects/database-busy';
import { isDatabaseUnavailable } from '../dialects/database-unavailable';
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
  /**
   * `slow` while this process's publisher waits for late broker confirms (`OutboxPublisher.brokerSlow`): messages
   * still go out, more slowly; not a reason to be down (the lag limit is). `prompt` otherwise.
   */
  broker: 'prompt' | 'slow';
  /**
   * `saturated` when the stats query could not get a connection or a lock in time (pool or lock wait timeout): the
   * database answers but is busy. The outbox stays `up` (restarting or unrouting a busy replica adds load) and
   * reports the stats of its last successful check (zeros before the first), with the error in `saturation`.
   * `unreachable` when the connection failed or was lost, `failed` when the query failed otherwise (a missing
   * table, …): both `down`, with the error in `problems`. `ok` when it went through.
   */
  database: 'ok' | 'saturated' | 'unreachable' | 'failed';
  /** What the busy database said (with `database: 'saturated'`). */
  saturation?: string;
}

/**
 * The key an outbox is reported under when none is given: `outbox` for the default DataSource's, `outbox-<name>`
 * for a named one's (so two outboxes never report under one key, which terminus would merge into one).
 */
export function outboxHealthKey(dataSourceName: string): string {
  return isDefaultDataSource(dataSourceName) ? 'outbox' : `outbox-${dataSourceName}`;
}

/**
 * A `@nestjs/terminus` health indicator for the outbox: backlog, lag of the oldest pending message and dead
 * count (one indexed query, `OutboxService.stats()`), compared with `thresholds`. Provided and exported by
 * `OutboxModule`, one per outbox; it returns terminus's result shape and does not import `@nestjs/terminus` itself.
 *
 * ```ts
 * @Get('health') @HealthCheck()
 * check() { return this.health.check([() => this.outboxHealth.isHealthy('outbox', { maxLagMs: 60_000 })]); }
 * // every outbox of the app, each under its own key (`outbox`, `outbox-billing`, …):
 * check() { return this.health.check([() => this.outboxHealth.isEveryOutboxHealthy({ maxLagMs: 60_000 })]); }
 * ```
 */
@Injectable()
export class OutboxHealthIndicator {
  /** Finds the app's other outboxes for `isEveryOutboxHealthy()` (DiscoveryModule is imported by OutboxModule). */
  @Optional()
  @Inject(DiscoveryService)
  private readonly discovery?: DiscoveryService;

  /** Each outbox's stats at its last successful check, reported while its database is saturated. */
  private readonly lastStats = new WeakMap<OutboxService, OutboxStats>();

  constructor(protected readonly outbox: OutboxService) {}

  /**
   * This outbox's health under `key`: by default `outbox` for the default DataSource's outbox and `outbox-<name>`
   * for a named one's.
   */
  async isHealthy<const Key extends string = string>(
    key?: Key,
    thresholds: OutboxHealthThresholds = {},
  ): Promise<Record<Key, OutboxHealthDetails>> {
    const name = key ?? (outboxHealthKey(this.outbox.dataSourceName) as Key);
    return { [name]: await this.report(this.outbox, thresholds) } as Record<Key, OutboxHealthDetails>;
  }

  /**
   * The health of every outbox of the app (one per `OutboxModule` import), each under its own key: `outbox` for the
   * default DataSource's, `outbox-<name>` for a named one's. The overall result is down when one of them is.
   * `thresholds` apply to each; `perOutbox` overrides them for the outbox of a DataSource name. The stats queries run
   * together.
   */
  async isEveryOutboxHealthy(
    thresholds: OutboxHealthThresholds = {},
    perOutbox: Readonly<Record<string, OutboxHealthThresholds>> = {},
  ): Promise<Record<string, OutboxHealthDetails>> {
    const outboxes = this.discovery
      ? findOutboxes(this.discovery)
      : new Map([[this.outbox.dataSourceName, this.outbox]]);
    const unknown = Object.keys(perOutbox).filter((name) => !outboxes.has(name));
    if (unknown.length > 0) {
      throw new OutboxConfigurationError(
        `isEveryOutboxHealthy() was given thresholds for ${unknown.map((n) => `'${n}'`).join(', ')}, which this app ` +
          `has no outbox of. Its outboxes: ${[...outboxes.keys()].join(', ')} (DataSource names; 'default' for the ` +
          'default DataSource).',
      );
    }
    const reports = await Promise.all(
      [...outboxes].map(async ([name, outbox]) => {
        const details = await this.report(outbox, { ...thresholds, ...perOutbox[name] });
        return [outboxHealthKey(name), details] as const;
      }),
    );
    return Object.fromEntries(reports);
  }

  /** One outbox's stats against the limits. */
  private async report(outbox: OutboxService, thresholds: OutboxHealthThresholds): Promise<OutboxHealthDetails> {
    const limits = { ...DEFAULT_OUTBOX_HEALTH_THRESHOLDS, ...thresholds };
    const broker = outbox.brokerSlow ? 'slow' : 'prompt';
    let stats: OutboxStats;
    try {
      stats = await outbox.stats();
      this.lastStats.set(outbox, stats);
    } catch (error) {
      const empty: OutboxStats = { pending: 0, due: 0, inFlight: 0, dead: 0, oldestPendingAgeMs: 0 };
      if (isDatabaseBusy(error)) {
        const last = this.lastStats.get(outbox) ?? empty;
        return { status: 'up', ...last, broker, database: 'saturated', saturation: describeError(error) };
      }
      const problems = [`stats query failed: ${describeError(error)}`];
      const database = isDatabaseUnavailable(error) ? 'unreachable' : 'failed';
      return { status: 'down', ...empty, broker, database, problems };
    }
    const problems = this.problems(stats, limits);
    const status = problems.length > 0 ? 'down' : 'up';
    const details: OutboxHealthDetails = { status, ...stats, broker, database: 'ok' };
    if (problems.length > 0) details.problems = problems;
    return details;
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
