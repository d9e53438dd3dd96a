import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnModuleDestroy,
  Optional,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type { ClientProxy } from '@nestjs/microservices';
import { SchedulerRegistry } from '@nestjs/schedule';
import { randomUUID } from 'node:crypto';
import { lastValueFrom, Observable, timeout, TimeoutError } from 'rxjs';
import type { ClaimedOutboxRow, OutboxFailure } from '../dialects/outbox-dialect';
import { OutboxConfigurationError, OutboxNonRetryableError, OutboxPublishTimeoutError } from '../errors';
import { OUTBOX_OPTIONS, OUTBOX_PUBLISHER_JOB } from '../outbox.constants';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { OutboxDatabase } from '../outbox/outbox-database';
import { SerialQueue } from '../transaction/serial-queue';
import { outsideTransactionContext } from '../transaction/transaction-context';
import { runOnConnection } from '../transaction/transaction-runner';
import type { OutboxTransport } from '../transports/outbox-transport';
import { resolveTransport } from '../transports/resolve-transport';
import { retryDelay } from './backoff';

/** Outcome of one publish pass. */
export interface OutboxPassResult {
  claimed: number;
  published: number;
  failed: number;
  /** Rows whose claim was taken over by another publisher before this one could mark them (lease lost). */
  fenced: number;
}

/**
 * Relays due outbox rows to the broker. Each pass claims a batch (exclusive claim with a lease on the database
 * clock, fenced by a per-pass owner token), publishes it concurrently, waits for every confirmation (bounded by
 * `publishTimeout`) and marks the batch in one statement; failures are rescheduled with backoff or marked dead.
 *
 * The loop is registered in `SchedulerRegistry` (when `ScheduleModule.forRoot()` is imported) under
 * `nestjs-outbox:publisher`; passes never overlap. Steps are `protected` so they can be overridden.
 */
@Injectable()
export class OutboxPublisher implements OnApplicationBootstrap, OnModuleDestroy {
  protected readonly logger = new Logger('OutboxPublisher');
  private readonly passes = new SerialQueue();
  private client?: ClientProxy;
  private transport?: OutboxTransport;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private draining?: Promise<void>;
  private again = false;
  private wakeScheduled = false;
  private failingSince?: number;
  private lastFailureLog = 0;

  constructor(
    @Inject(OUTBOX_OPTIONS) protected readonly options: ResolvedOutboxOptions,
    protected readonly database: OutboxDatabase,
    protected readonly moduleRef: ModuleRef,
    @Optional() protected readonly schedulerRegistry?: SchedulerRegistry,
  ) {}

  /** Name of the loop in `SchedulerRegistry`. */
  get jobName(): string {
    const ds = this.database.name;
    return ds && ds !== 'default' ? `${OUTBOX_PUBLISHER_JOB}:${ds}` : OUTBOX_PUBLISHER_JOB;
  }

  onApplicationBootstrap(): void {
    if (this.options.client !== undefined) this.resolveClient();
    if (!this.options.publisher.enabled) return;
    this.stopped = false;
    this.timer = setInterval(() => this.trigger(), this.options.publisher.pollingInterval);
    this.timer.unref?.();
    if (this.schedulerRegistry) {
      if (this.schedulerRegistry.doesExist('interval', this.jobName)) {
        throw new OutboxConfigurationError(
          `An interval named '${this.jobName}' is already registered in SchedulerRegistry. ` +
            'Import OutboxModule once per DataSource.',
        );
      }
      this.schedulerRegistry.addInterval(this.jobName, this.timer);
    }
    this.trigger();
  }

  /** Stops claiming, then waits for the pass in flight to settle — before `ClientsModule` closes its clients. */
  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    if (this.timer) {
      if (this.schedulerRegistry?.doesExist('interval', this.jobName)) this.schedulerRegistry.deleteInterval(this.jobName);
      else clearInterval(this.timer);
      this.timer = undefined;
    }
    await this.draining;
  }

  /** Asks for a pass as soon as possible (after a commit that wrote outbox rows). Coalesced; a hint only. */
  wake(): void {
    if (this.stopped || !this.options.publisher.enabled || this.wakeScheduled) return;
    this.wakeScheduled = true;
    outsideTransactionContext(() =>
      setImmediate(() => {
        this.wakeScheduled = false;
        this.trigger();
      }),
    );
  }

  /** Runs publish passes until no due row is left (bounded by one pass when nothing is due). For tests and scripts. */
  async flush(): Promise<number> {
    this.resolveClient();
    let total = 0;
    for (;;) {
      const result = await this.runPass();
      total += result.published;
      if (result.claimed < this.options.publisher.batchSize) return total;
    }
  }

  /** One pass, never overlapping another. */
  runPass(): Promise<OutboxPassResult> {
    return outsideTransactionContext(() => this.passes.run(() => this.pass()));
  }

  /** Starts draining unless a drain is running, in which case that drain goes round once more. */
  protected trigger(): void {
    if (this.stopped) return;
    if (this.draining) {
      this.again = true;
      return;
    }
    this.draining = this.drain().finally(() => {
      this.draining = undefined;
    });
  }

  protected async drain(): Promise<void> {
    do {
      this.again = false;
      try {
        const result = await this.runPass();
        this.recovered();
        if (result.claimed >= this.options.publisher.batchSize) this.again = true;
      } catch (error) {
        this.reportPassFailure(error);
        return;
      }
    } while (this.again && !this.stopped);
  }

  /** Claim, publish concurrently, mark. */
  protected async pass(): Promise<OutboxPassResult> {
    const client = this.resolveClient();
    const { dataSource, dialect, table } = this.database;
    const owner = randomUUID();
    const { batchSize, leaseDuration } = this.options.publisher;
    const rows = await runOnConnection(dataSource, (m) => dialect.claim(m, { table, owner, limit: batchSize, leaseMs: leaseDuration }));
    if (rows.length === 0) return { claimed: 0, published: 0, failed: 0, fenced: 0 };

    const outcomes = await Promise.all(rows.map((row) => this.publish(client, row).then(() => undefined, (error: unknown) => error)));
    const sent: string[] = [];
    const failures: OutboxFailure[] = [];
    outcomes.forEach((error, i) => {
      const row = rows[i];
      if (error === undefined) sent.push(row.seq);
      else failures.push(this.toFailure(row, error));
    });

    const marked = await runOnConnection(dataSource, (m) => dialect.markSent(m, table, owner, sent));
    const rescheduled = await runOnConnection(dataSource, (m) => dialect.markFailed(m, table, owner, failures));
    const fenced = sent.length - marked + (failures.length - rescheduled);
    if (fenced > 0) this.reportLostLease(fenced, rows.length);
    for (const failure of failures) this.reportPublishFailure(failure);
    return { claimed: rows.length, published: marked, failed: failures.length, fenced };
  }

  /** Publishes one row and resolves once the transport has confirmed it (or rejects on error / timeout). */
  protected async publish(client: ClientProxy, row: ClaimedOutboxRow): Promise<void> {
    const record = this.transport!.toRecord({
      messageId: row.messageId,
      pattern: row.pattern,
      payload: JSON.parse(row.payload),
      headers: row.headers ? JSON.parse(row.headers) : {},
      key: row.key,
    });
    const timeoutMs = this.options.publisher.publishTimeout;
    const result$: Observable<unknown> = client.emit(row.pattern, record).pipe(timeout({ first: timeoutMs }));
    try {
      await lastValueFrom(result$, { defaultValue: undefined });
    } catch (error) {
      if (error instanceof TimeoutError) {
        throw new OutboxPublishTimeoutError(`No confirmation within ${timeoutMs} ms (outcome unknown; will retry)`);
      }
      throw error;
    }
  }

  protected toFailure(row: ClaimedOutboxRow, error: unknown): OutboxFailure {
    const retry = this.options.retry;
    const dead = error instanceof OutboxNonRetryableError || row.attempts >= retry.maxAttempts;
    const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    return { seq: row.seq, error: text, dead, retryDelay: dead ? 0 : retryDelay(row.attempts, retry) };
  }

  protected reportPublishFailure(failure: OutboxFailure): void {
    if (failure.dead) this.logger.error(`Outbox message #${failure.seq} is dead after its last attempt: ${failure.error}`);
    else this.logger.warn(`Outbox message #${failure.seq} failed to publish, retrying in ${failure.retryDelay} ms: ${failure.error}`);
  }

  protected reportLostLease(fenced: number, claimed: number): void {
    this.logger.error(
      `Lost the lease on ${fenced} of ${claimed} claimed outbox messages before marking them: another publisher took ` +
        'them over, so they may be published twice. Raise publisher.leaseDuration or lower publisher.publishTimeout.',
    );
  }

  /** Logs a failing pass (database unreachable, …) at most once a minute while it keeps failing. */
  protected reportPassFailure(error: unknown): void {
    const now = Date.now();
    this.failingSince ??= now;
    if (now - this.lastFailureLog >= 60_000) {
      this.lastFailureLog = now;
      this.logger.error(`Outbox publish pass failed (will retry on the next poll): ${(error as Error)?.message ?? error}`);
    }
  }

  private recovered(): void {
    if (this.failingSince !== undefined) {
      this.logger.log(`Outbox publisher recovered after ${Date.now() - this.failingSince} ms of failing passes`);
      this.failingSince = undefined;
      this.lastFailureLog = 0;
    }
  }

  protected resolveClient(): ClientProxy {
    if (this.client) return this.client;
    const token = this.options.client;
    if (token === undefined) {
      throw new OutboxConfigurationError(
        'OutboxModule has no `client` to publish through. Pass `client: <token of a ClientsModule client>` to forRoot().',
      );
    }
    let client: ClientProxy;
    try {
      client = this.moduleRef.get(token, { strict: false });
    } catch {
      throw new OutboxConfigurationError(
        `OutboxModule option \`client\` names ${String(typeof token === 'function' ? token.name : token)}, but no provider ` +
          'with that token exists. Register it with ClientsModule.register([{ name: <token>, transport, options }]) in a module the app imports.',
      );
    }
    if (typeof (client as ClientProxy)?.emit !== 'function') {
      throw new OutboxConfigurationError(
        `OutboxModule option \`client\` resolves to ${(client as object)?.constructor?.name ?? typeof client}, which is not a ClientProxy.`,
      );
    }
    this.transport = resolveTransport(this.options.transport, client);
    this.client = client;
    return client;
  }
}
