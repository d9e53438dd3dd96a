import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy, Optional } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { OUTBOX_OPTIONS } from '../outbox.constants';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { OutboxDatabase } from '../dialects/outbox-database';
import { SerialQueue } from '../util/serial-queue';
import { outsideTransactionContext } from '../transaction/transaction-context';
import { OutboxCleanupRegistry } from '../scheduling/outbox-cleanup.registry';
import { OutboxRetentionTask } from './outbox-retention.task';
import { describeError } from '../util/describe-error';
import { stopRegisteredInterval } from '../scheduling/registered-interval';

import { outboxLogContext } from '../scheduling/outbox-resource-names';

export { OUTBOX_CLEANUP_JOB } from '../scheduling/outbox-resource-names';

/** Most batches one task deletes per run, so a large backlog is worked off over several runs. */
const MAX_BATCHES_PER_RUN = 100;

/**
 * The scheduled cleanup: every `cleanup.interval` it runs each registered `OutboxCleanupTask` (sent outbox rows
 * past `cleanup.retention`, expired idempotency records, …) in batches of `cleanup.batchSize`, one short
 * transaction each, until a batch comes back short. Runs never overlap; replicas skip each other's rows.
 */
@Injectable()
export class OutboxCleanupScheduler implements OnApplicationBootstrap, OnModuleDestroy {
  /** `OutboxCleanup`, or `OutboxCleanup(<dataSource>)` for a named DataSource's outbox. */
  protected readonly logger: Logger;
  private readonly runs = new SerialQueue();
  private timer?: NodeJS.Timeout;
  private stopped = false;

  constructor(
    @Inject(OUTBOX_OPTIONS) protected readonly options: ResolvedOutboxOptions,
    protected readonly database: OutboxDatabase,
    protected readonly registry: OutboxCleanupRegistry,
    @Optional() protected readonly schedulerRegistry?: SchedulerRegistry,
  ) {
    this.logger = new Logger(outboxLogContext('OutboxCleanup', database.name));
  }

  /** Name of the cleanup's interval in `SchedulerRegistry` (`nestjs-outbox:cleanup`, `…:<dataSource>` if named). */
  get jobName(): string {
    return this.database.resources.cleanupJob;
  }

  onApplicationBootstrap(): void {
    if (!this.options.cleanup.deleteOnPublish) {
      this.registry.register(new OutboxRetentionTask(this.database, this.options.cleanup.retention));
    }
    if (!this.options.cleanup.enabled) return;
    this.timer = setInterval(() => {
      this.runOnce().catch((error) => this.logger.error(`Cleanup run failed (will retry): ${describeError(error)}`));
    }, this.options.cleanup.interval);
    this.timer.unref?.();
    if (this.schedulerRegistry && !this.schedulerRegistry.doesExist('interval', this.jobName)) {
      this.schedulerRegistry.addInterval(this.jobName, this.timer);
    }
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    if (this.timer) {
      stopRegisteredInterval(this.schedulerRegistry, this.jobName, this.timer);
      this.timer = undefined;
    }
    await this.runs.run(async () => undefined);
  }

  /** Runs every registered task now; resolves with the rows deleted per task name. */
  runOnce(): Promise<Record<string, number>> {
    return outsideTransactionContext(() =>
      this.runs.run(async () => {
        const deleted: Record<string, number> = {};
        const batchSize = this.options.cleanup.batchSize;
        for (const task of this.registry.all()) {
          let total = 0;
          try {
            for (let i = 0; i < MAX_BATCHES_PER_RUN && !this.stopped; i++) {
              const n = await task.deleteBatch(batchSize);
              total += n;
              if (n < batchSize) break;
              await new Promise((resolve) => setImmediate(resolve));
            }
          } catch (error) {
            this.logger.error(`Cleanup task '${task.name}' failed (will retry next run): ${describeError(error)}`);
          }
          deleted[task.name] = total;
        }
        return deleted;
      }),
    );
  }
}
