import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy, Optional } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type { ClientProxy } from '@nestjs/microservices';
import { SchedulerRegistry } from '@nestjs/schedule';
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { ClaimedOutboxRow, NewOutboxRow } from '../dialects/outbox-dialect';
import { OutboxDatabase } from '../dialects/outbox-database';
import { OutboxWakeup, resolveWakeup } from '../dialects/resolve-wakeup';
import { OutboxConfigurationError } from '../errors';
import { OutboxHandlerRegistry } from '../handlers/outbox-handler-registry';
import { IdempotencyService } from '../idempotency/idempotency.service';
import type { OutboxEventPayload, OutboxPublisherEvents } from '../events/publisher-events';
import { OUTBOX_OPTIONS } from '../outbox.constants';
import { outboxLogContext, type OutboxResourceNames } from '../scheduling/outbox-resource-names';
import type { OutboxTransportName, ResolvedOutboxOptions } from '../outbox.options';
import { outsideTransactionContext } from '../transaction/transaction-context';
import { runOnConnection } from '../transaction/transaction-runner';
import { SerialQueue } from '../util/serial-queue';
import { BatchLease } from './batch-lease';
import { BrokerPace } from './broker-pace';
import { PublishFailureLog } from './failure-log';
import {
  BatchOutcome,
  ClaimedBatch,
  claimDueRows,
  EMPTY_PASS,
  LEASE_SAFETY_MS,
  OutboxPassResult,
  publishedEntry,
  writeOutcome,
} from './publish-pass';
import { publishBatchRows } from './publish-batch';
import { RowDelivery } from './destinations/row-delivery';
import { PublisherEventEmitter } from './publisher-event-emitter';
import { PublisherLoop } from './publisher-loop';

/**
 * Relays due outbox rows to the broker. Each pass claims a batch (an exclusive claim under row locks, with a lease
 * computed on the database clock and a per-pass owner token), publishes it concurrently — a key's rows one after
 * another, in order, different keys and unkeyed rows in parallel — waits for every confirmation (a late one too,
 * while the client stays connected: `confirm-wait.ts`, the lease kept by `batch-lease.ts`, smaller batches by
 * `broker-pace.ts`), then marks the batch in one statement per outcome, fenced by the owner token: failures are
 * rescheduled with backoff or marked dead; rows not started are released.
 *
 * The loop is registered in `SchedulerRegistry` (when `ScheduleModule.forRoot()` is imported) under
 * `nestjs-outbox:publisher`; it runs one claim at a time and keeps up to `maxBatchesInFlight` claimed batches
 * awaiting confirmations (claimed rows stay exclusive, so order and exclusivity hold). Commits wake it at once; on
 * PostgreSQL other replicas are woken by LISTEN/NOTIFY. The steps of a pass are `protected`.
 *
 * This class strings the parts together; each lives in its own file: the loop (`publisher-loop.ts`), the steps of
 * a pass (`publish-pass.ts`, a batch's publishing in `publish-batch.ts`), a row's destinations
 * (`destinations/row-delivery.ts`), failure reporting (`failure-log.ts`) and events (`publisher-event-emitter.ts`).
 *
 * Events (`publisher.on(name, listener)`): `published`, `leaseLost`, `dead`, `retry`, `requeued` — see
 * `OutboxPublisherEvents`.
 */
@Injectable()
export class OutboxPublisher implements OnApplicationBootstrap, OnModuleDestroy {
  /** `OutboxPublisher`, or `OutboxPublisher(<dataSource>)` for a named DataSource's outbox. */
  protected readonly logger: Logger;
  protected readonly events = new EventEmitter();
  /** Identifies this process's publisher (its own NOTIFYs are ignored). */
  readonly instanceId = randomUUID();
  private readonly passes = new SerialQueue();
  private readonly loop: PublisherLoop;
  private readonly emitter: PublisherEventEmitter;
  /** Where rows go (brokers, in-process handlers) and what a failed delivery means. */
  private readonly delivery: RowDelivery;
  private readonly failures: PublishFailureLog;
  /** The batch size while the broker confirms late. */
  private readonly pace: BrokerPace;
  /** The lease keeper of each claimed row's batch, for a late confirm of that row. */
  private readonly leases = new WeakMap<ClaimedOutboxRow, BatchLease>();
  private wakeup?: OutboxWakeup;

  constructor(
    @Inject(OUTBOX_OPTIONS) protected readonly options: ResolvedOutboxOptions,
    protected readonly database: OutboxDatabase,
    protected readonly moduleRef: ModuleRef,
    @Optional() protected readonly schedulerRegistry?: SchedulerRegistry,
    @Optional() protected readonly handlers?: OutboxHandlerRegistry,
    @Optional() protected readonly idempotency?: IdempotencyService,
  ) {
    this.logger = new Logger(outboxLogContext('OutboxPublisher', database.name));
    this.emitter = new PublisherEventEmitter(this.events, this.logger, database.name);
    this.delivery = new RowDelivery(moduleRef, options, handlers, idempotency, {
      waiting: (row, waiting) => {
        const lease = this.leases.get(row);
        if (lease) lease.waiting += waiting ? 1 : -1;
      },
      late: (row) => this.confirmLate(row),
      stopping: () => this.loop.stopped,
    });
    this.failures = new PublishFailureLog(this.logger, (event, payload) => this.emitEvent(event, payload));
    this.pace = new BrokerPace(options.publisher, this.logger);
    const pace = this.pace;
    this.loop = new PublisherLoop(
      {
        claim: () => this.claimBatch(),
        settle: (batch) => this.settle(batch),
        claimed: () => this.failures.passSucceeded(),
        failed: (error) => this.failures.passFailed(error),
      },
      {
        get batchSize() {
          return pace.batchSize;
        },
        maxBatchesInFlight: options.publisher.maxBatchesInFlight,
      },
    );
  }

  /** Name of the loop in `SchedulerRegistry`. */
  get jobName(): string {
    return this.database.resources.publisherJob;
  }

  /**
   * The names this outbox uses beside its tables — its jobs in `SchedulerRegistry`, its PostgreSQL NOTIFY channel
   * and the first key of its advisory locks — distinct for each outbox of the app (see `outboxResourceNames()`).
   */
  get resourceNames(): OutboxResourceNames {
    return this.database.resources;
  }

  /**
   * True while the broker confirms late: a publish waited more than `publishTimeout` for its confirm on a connected
   * client, and batches of full size have not been confirmed promptly since. Shown by the health indicator and the
   * `outbox.relay.broker.slow` metric.
   */
  get brokerSlow(): boolean {
    return this.pace.slow;
  }

  /** The transport messages are built for (`rmq`, `tcp`, …), once the client has been resolved. */
  get transportName(): OutboxTransportName | undefined {
    return this.delivery.brokers.primary?.client.transport?.name;
  }

  /**
   * The destinations `emit()` writes a message to, one row each: `['']` (one row for every destination, as in
   * earlier versions) in an outbox without `route` when the message has at most one destination; else
   * `broker:<token>` for the broker `route.select()` picks (or the `client`) and `handler:<name>` for each
   * `@OnOutboxEvent()` handler of its pattern (see `RowDelivery.destinationsOf()`).
   */
  destinationsOf(message: Pick<NewOutboxRow, 'messageId' | 'pattern' | 'key' | 'headers'>): readonly string[] {
    return this.delivery.destinationsOf(message);
  }

  /** Subscribes to a publisher event. */
  on<E extends keyof OutboxPublisherEvents>(event: E, listener: (payload: OutboxPublisherEvents[E]) => void): this {
    this.events.on(event, listener);
    return this;
  }

  /** Unsubscribes from a publisher event. */
  off<E extends keyof OutboxPublisherEvents>(event: E, listener: (payload: OutboxPublisherEvents[E]) => void): this {
    this.events.off(event, listener);
    return this;
  }

  /** True when `event` has a listener or a diagnostics-channel subscriber (so building its payload is worth it). */
  isWatched(event: keyof OutboxPublisherEvents): boolean {
    return this.emitter.isWatched(event);
  }

  /** Reports dead messages made pending again (the `requeued` event); called by `OutboxDeadLetters.requeue()`. */
  reportRequeued(event: OutboxEventPayload<'requeued'>): void {
    this.emitEvent('requeued', event);
  }

  /** Sends an event to its listeners and its diagnostics channel (a listener that throws is logged). */
  protected emitEvent<E extends keyof OutboxPublisherEvents>(event: E, payload: OutboxEventPayload<E>): void {
    this.emitter.send(event, payload);
  }

  async onApplicationBootstrap(): Promise<void> {
    this.delivery.brokers.resolveAll();
    if (this.options.publisher.enabled) this.delivery.checkConfigured();
    const { dataSource, dialect, table } = this.database;
    await runOnConnection(dataSource, (m) => dialect.prepare(m, table));
    if (this.options.publisher.notify) {
      this.wakeup = resolveWakeup(this.database, this.instanceId);
      if (this.wakeup && this.options.publisher.enabled) void this.wakeup.listen(() => this.trigger());
    }
    if (!this.options.publisher.enabled) return;
    if (this.schedulerRegistry?.doesExist('interval', this.jobName)) {
      throw new OutboxConfigurationError(
        `An interval named '${this.jobName}' is already registered in SchedulerRegistry. ` +
          'Import OutboxModule once per DataSource.',
      );
    }
    this.loop.start(this.options.publisher.pollingInterval, () => this.trigger(), this.schedulerRegistry, this.jobName);
    this.trigger();
  }

  /**
   * Stops claiming, lets the publishes in flight settle and releases the claimed rows that were not started —
   * all before `ClientsModule` closes its clients (in `onApplicationShutdown`).
   */
  async onModuleDestroy(): Promise<void> {
    this.loop.stop(this.schedulerRegistry, this.jobName);
    await this.wakeup?.close();
    await this.loop.drain();
    this.delivery.brokers.close();
    await this.database.dialect.dispose(this.database.dataSource);
  }

  /**
   * Asks for a pass as soon as possible (after a commit that wrote outbox rows). Coalesced; a hint only.
   * On PostgreSQL the other replicas are woken with NOTIFY only when this process will not take the rows at once:
   * its publisher is disabled or stopping, or its loop already has `maxBatchesInFlight` batches awaiting
   * confirmations. A NOTIFY per commit would cost every commit another statement and every listener a wake-up, for
   * rows the local publisher claims anyway.
   */
  wake(): void {
    const { enabled, maxBatchesInFlight } = this.options.publisher;
    if (this.wakeup && (this.loop.stopped || !enabled || this.loop.batchesInFlight >= maxBatchesInFlight)) {
      this.wakeup.notify();
    }
    if (this.loop.stopped || !enabled) return;
    this.loop.soon(() => this.trigger());
  }

  /** Runs publish passes until no due row is left (bounded by one pass when nothing is due). For tests and scripts. */
  async flush(): Promise<number> {
    this.delivery.checkConfigured();
    this.delivery.brokers.resolveAll();
    let total = 0;
    for (;;) {
      const result = await this.runPass();
      total += result.published;
      // A short batch does not mean the end: a key's later rows become claimable once its earlier ones are sent.
      if (result.claimed === 0 || result.published === 0) return total;
    }
  }

  /** One full pass (claim, publish, complete), never overlapping another `runPass()`. For tests and scripts. */
  runPass(): Promise<OutboxPassResult> {
    return outsideTransactionContext(() => this.passes.run(() => this.pass()));
  }

  /**
   * Asks the loop for a pass. The loop claims one batch at a time and starts the next claim as soon as a batch's
   * publishes are under way (up to `maxBatchesInFlight` batches awaiting confirmations), so a commit never waits
   * for an earlier batch's broker confirmations. Rows of an in-flight batch stay claimed, so no row is taken twice
   * and a key's later rows wait for its earlier ones.
   */
  protected trigger(): void {
    this.loop.request();
  }

  /** Claim, publish concurrently (in order within a key), mark. */
  protected async pass(): Promise<OutboxPassResult> {
    const claim = await this.claimBatch();
    if (!claim) return { ...EMPTY_PASS };
    return this.settle(claim);
  }

  /** Claims up to `batchSize` due rows under a new owner token. */
  protected async claimBatch(): Promise<ClaimedBatch | undefined> {
    this.delivery.checkConfigured();
    this.delivery.brokers.resolveAll();
    return claimDueRows(this.database, { ...this.options.publisher, batchSize: this.pace.batchSize });
  }

  /** Publishes a claimed batch and writes its outcome back. */
  protected async settle(batch: ClaimedBatch): Promise<OutboxPassResult> {
    const { owner, rows, leaseDeadline } = batch;
    await this.delivery.brokers.ready();
    const primary = this.delivery.brokers.primary;
    const { leaseDuration, maxConfirmWait, publishTimeout } = this.options.publisher;
    const lease = new BatchLease(this.database, batch, leaseDuration, maxConfirmWait + publishTimeout);
    for (const row of rows) this.leases.set(row, lease);
    let outcome: BatchOutcome;
    try {
      outcome = await this.publishBatch(primary && this.delivery.brokers.clientOf(primary), rows, leaseDeadline);
    } finally {
      await lease.end();
    }
    this.pace.batchDone(lease.late, outcome.sent.length);
    return this.complete(owner, rows, outcome);
  }

  /**
   * Publishes a claimed batch: unkeyed rows all at once, each key's rows in sequence (a failure stops its key; the
   * rest of that key is left unstarted). A row is started only while the publisher runs and the lease has more
   * than `publishTimeout` left.
   */
  protected async publishBatch(
    client: ClientProxy | undefined,
    rows: ClaimedOutboxRow[],
    leaseDeadline: number,
  ): Promise<BatchOutcome> {
    const timeoutMs = this.options.publisher.publishTimeout;
    // The lease moves on while a late confirm keeps it (see BatchLease).
    const lease = rows[0] && this.leases.get(rows[0]);
    const deadline = () => lease?.deadline ?? leaseDeadline;
    const mayStart = () => !this.loop.stopped && Date.now() + timeoutMs + LEASE_SAFETY_MS <= deadline();
    const publish = (row: ClaimedOutboxRow) => this.publish(client, row);
    return publishBatchRows(rows, mayStart, publish, (row, error) => this.delivery.failureOf(row, error));
  }

  /** Writes a batch's outcome back, fenced by the claim's owner token, and reports what happened. */
  protected async complete(owner: string, rows: ClaimedOutboxRow[], outcome: BatchOutcome): Promise<OutboxPassResult> {
    const { deleteOnPublish } = this.options.cleanup;
    const history = { publisher: this.options.publisher.instanceId, limit: this.options.retry.historyLimit };
    const { marked, fenced, released } = await writeOutcome(this.database, owner, outcome, deleteOnPublish, history);
    const failures = outcome.failures.map((f) => f.failure);
    if (fenced > 0) this.failures.leaseLost(owner, rows, fenced);
    if (outcome.sent.length > 0 && this.emitter.isWatched('published')) {
      const messages = outcome.sent.map((row) => publishedEntry(row, outcome.timings?.get(row.seq)));
      this.emitEvent('published', { owner, messages });
    }
    this.delivery.batchDone(outcome);
    // Dead messages one line each; retried ones summed up, the log bounded while publishing fails (failure-log.ts).
    for (const { row, failure } of outcome.failures) this.failures.messageFailed(row, failure);
    this.failures.batchCompleted(outcome);
    return { claimed: rows.length, published: marked, failed: failures.length, fenced, released };
  }

  /**
   * Delivers one row to its destination and resolves once it succeeded: a broker (`broker:<token>`), confirmed by
   * the transport, or an `@OnOutboxEvent()` handler (`handler:<name>`), run once in its own transaction with its
   * deduplication record. A row for every destination (`''`) goes to all of its message's destinations — its broker
   * (the `client`, or the one `route.select()` picks) and each handler of its pattern (one an earlier attempt
   * applied is skipped) — and rejects with the failure that decides its fate (see `deliverToAll()`).
   */
  protected publish(client: ClientProxy | undefined, row: ClaimedOutboxRow): Promise<void> {
    return this.delivery.deliver(client, row);
  }

  /** A confirm of `row` is late on a connected client: its batch tells the pace, which slows down. */
  private confirmLate(row: ClaimedOutboxRow): void {
    const lease = this.leases.get(row);
    if (lease) lease.late = true;
    this.pace.confirmLate();
  }
}
