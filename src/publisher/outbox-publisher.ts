import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy, Optional } from '@nestjs/common';
import type { ClientProxy } from '@nestjs/microservices';
import { SchedulerRegistry } from '@nestjs/schedule';
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { ClaimedOutboxRow } from '../dialects/outbox-dialect';
import { OutboxDatabase } from '../dialects/outbox-database';
import { OutboxWakeup, resolveWakeup } from '../dialects/resolve-wakeup';
import { OutboxConfigurationError } from '../errors';
import { OutboxDestinations } from '../destinations/outbox-destinations';
import { tokenName } from '../destinations/route.options-validation';
import { ConsumerRegistry } from '../idempotency/consumer-registry';
import { IdempotencyService } from '../idempotency/idempotency.service';
import type { OutboxEventPayload, OutboxPublisherEvents } from '../events/publisher-events';
import { OUTBOX_OPTIONS } from '../outbox.constants';
import { type OutboxRelay, OutboxRelayRegistry } from '../scheduling/outbox-relay.registry';
import { outboxLogContext, type OutboxResourceNames } from '../scheduling/outbox-resource-names';
import type { OutboxTransportName, ResolvedOutboxOptions } from '../outbox.options';
import { outsideTransactionContext } from '../transaction/transaction-context';
import { runOnConnection } from '../transaction/transaction-runner';
import { SerialQueue } from '../util/serial-queue';
import { BatchLeases } from './batch-lease';
import { BrokerPace } from './broker-pace';
import { type BrokerCircuit, breakerLog } from './circuit-breaker';
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
import { publishBatchRows, publishStreamed } from './publish-batch';
import { RelayTrier } from './relay-trier';
import { type ConfirmWatch, RowDelivery } from './row-delivery';
import { PublisherEventEmitter } from './publisher-event-emitter';
import { PublisherLoop } from './publisher-loop';
import { WalMode } from './wal-mode';

/**
 * Relays due outbox rows to their destinations. A pass claims a batch (exclusive, leased on the database clock,
 * under an owner token), publishes it — a key's rows in order, the rest concurrently — waits for every confirmation
 * (late ones too while the client is connected), then writes the outcome fenced by the token: sent, retried with
 * backoff, dead, or released. The loop (`publisher-loop.ts`, in `SchedulerRegistry` as `nestjs-outbox:publisher`)
 * claims one batch at a time and keeps up to `maxBatchesInFlight` in flight; commits wake it, and NOTIFY wakes other
 * replicas on PostgreSQL. With `publisher.mode: 'wal'` new rows come from the WAL stream (`wal-mode.ts`). The parts:
 * `publish-pass.ts`, `publish-batch.ts`, `row-delivery.ts`, `confirm-wait.ts`, `batch-lease.ts`, `broker-pace.ts`,
 * `failure-log.ts`, `publisher-event-emitter.ts`. Events: `published`, `leaseLost`, `dead`, `retry`, `requeued`
 * (`OutboxPublisherEvents`).
 */
@Injectable()
export class OutboxPublisher implements OutboxRelay, OnApplicationBootstrap, OnModuleDestroy {
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
  /** The lease keeper of each claimed batch, reached by its rows' confirm waits. */
  private readonly leases: BatchLeases;
  private wakeup?: OutboxWakeup;
  private readonly wal: WalMode; // publisher.mode (wal-mode.ts)

  constructor(
    @Inject(OUTBOX_OPTIONS) protected readonly options: ResolvedOutboxOptions,
    protected readonly database: OutboxDatabase,
    private readonly destinations: OutboxDestinations,
    relays: OutboxRelayRegistry,
    @Optional() protected readonly schedulerRegistry?: SchedulerRegistry,
    @Optional() protected readonly idempotency?: IdempotencyService,
    @Optional() consumers?: ConsumerRegistry,
  ) {
    relays.register(this);
    relays.addTrier(new RelayTrier(destinations, database.dataSource, idempotency, consumers));
    this.logger = new Logger(outboxLogContext('OutboxPublisher', database.name));
    this.emitter = new PublisherEventEmitter(this.events, this.logger, database.name);
    this.pace = new BrokerPace(options.publisher, this.logger);
    const { leaseDuration, maxConfirmWait, publishTimeout } = options.publisher;
    this.leases = new BatchLeases(database, this.pace, leaseDuration, maxConfirmWait + publishTimeout);
    const confirms: ConfirmWatch = {
      waiting: (row, waiting) => this.leases.waiting(row, waiting),
      late: (row) => this.leases.late(row),
      stopping: () => this.loop.stopped,
    };
    this.delivery = new RowDelivery(destinations, options, idempotency, confirms, consumers, breakerLog(this.logger));
    this.failures = new PublishFailureLog(this.logger, (event, payload) => this.emitter.send(event, payload));
    this.wal = new WalMode(options, database, this.logger);
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

  /** The names this outbox uses beside its tables, distinct for each outbox of the app (`outboxResourceNames()`). */
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

  /**
   * The circuit breaker of each broker this process has published to (`publisher.circuitBreaker`; empty when it is
   * off): `closed`, `open` (its messages wait, attempts not counted) or `half-open` (one probe decides). State of
   * this process only. Shown by the console and the `outbox.relay.breaker.state` metric.
   */
  get circuits(): BrokerCircuit[] {
    for (const broker of this.destinations.brokers.all) this.delivery.breakers.of(tokenName(broker.token));
    return this.delivery.breakers.states();
  }

  /** WAL modes: `'off'` (polling: mode `'poll'`, a fallback), `'standby'` (another replica streams), `'streaming'`. */
  get walState(): 'off' | 'standby' | 'streaming' {
    return !this.wal.active ? 'off' : this.wal.streaming ? 'streaming' : 'standby';
  }

  /** The WAL relay's slot lag in bytes — not yet acknowledged, and retained WAL — or `undefined` when it is off. */
  walLag(): Promise<{ lagBytes: number; retainedBytes: number } | undefined> {
    return this.wal.lag();
  }

  /** The transport messages are built for (`rmq`, `tcp`, …), once the client has been resolved. */
  get transportName(): OutboxTransportName | undefined {
    return this.destinations.brokers.primary?.client.transport?.name;
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
    this.emitter.send('requeued', event);
  }

  async onApplicationBootstrap(): Promise<void> {
    this.destinations.brokers.resolveAll();
    if (this.options.publisher.enabled && !this.delivery.hasConsumers) this.destinations.checkConfigured();
    if (this.options.publisher.enabled) await this.destinations.brokers.checkSetup();
    const { dataSource, dialect, table } = this.database;
    await runOnConnection(dataSource, (m) => dialect.prepare(m, table));
    const publish = (client: ClientProxy | undefined, row: ClaimedOutboxRow) => this.publish(client, row);
    const failureOf = (row: ClaimedOutboxRow, error: unknown) => this.delivery.failureOf(row, error);
    const streamed = {
      publish: (rows: ClaimedOutboxRow[]) => publishStreamed(this.destinations, rows, publish, failureOf),
    };
    await this.wal.start({ ...streamed, written: (owner, outcome) => this.report(owner, outcome) }, () =>
      this.loop.request(),
    );
    if (this.options.publisher.notify) {
      this.wakeup = resolveWakeup(this.database, this.instanceId);
      if (this.wakeup && this.options.publisher.enabled) void this.wakeup.listen(() => this.loop.request());
    }
    if (!this.options.publisher.enabled) return;
    if (this.schedulerRegistry?.doesExist('interval', this.jobName)) {
      throw new OutboxConfigurationError(
        `An interval named '${this.jobName}' is already registered in SchedulerRegistry. ` +
          'Import OutboxModule once per DataSource.',
      );
    }
    this.loop.start(
      this.options.publisher.pollingInterval,
      () => this.loop.request(),
      this.schedulerRegistry,
      this.jobName,
    );
    this.loop.request();
  }

  /**
   * Stops claiming, lets the publishes in flight settle and releases the claimed rows that were not started —
   * all before `ClientsModule` closes its clients (in `onApplicationShutdown`).
   */
  async onModuleDestroy(): Promise<void> {
    this.loop.stop(this.schedulerRegistry, this.jobName);
    await this.wal.stop();
    await this.wakeup?.close();
    await this.loop.drain();
    this.destinations.brokers.close();
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
    if (this.wal.active) return; // the stream brings new rows; polling would find them too young
    if (this.wakeup && (this.loop.stopped || !enabled || this.loop.batchesInFlight >= maxBatchesInFlight)) {
      this.wakeup.notify();
    }
    if (this.loop.stopped || !enabled) return;
    this.loop.soon(() => this.loop.request());
  }

  /** Runs publish passes until no due row is left (bounded by one pass when nothing is due). For tests and scripts. */
  async flush(): Promise<number> {
    if (!this.delivery.hasConsumers) this.destinations.checkConfigured(); // retrying consumers are destinations too
    this.destinations.brokers.resolveAll();
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

  /** Claim, publish concurrently (in order within a key), mark. */
  protected async pass(): Promise<OutboxPassResult> {
    const claim = await this.claimBatch();
    if (!claim) return { ...EMPTY_PASS };
    return this.settle(claim);
  }

  /** Claims up to `batchSize` due rows under a new owner token. */
  protected async claimBatch(): Promise<ClaimedBatch | undefined> {
    if (!this.delivery.hasConsumers) this.destinations.checkConfigured(); // retrying consumers are destinations too
    this.destinations.brokers.resolveAll();
    const { batchSize } = this.pace;
    return claimDueRows(this.database, { ...this.options.publisher, batchSize }, this.wal.handoffMs);
  }

  /** Publishes a claimed batch and writes its outcome back. */
  protected async settle(batch: ClaimedBatch): Promise<OutboxPassResult> {
    const { owner, rows, leaseDeadline } = batch;
    await this.destinations.brokers.ready();
    const primary = this.destinations.brokers.primary;
    const lease = this.leases.start(batch);
    let outcome: BatchOutcome;
    try {
      outcome = await this.publishBatch(primary && this.destinations.brokers.clientOf(primary), rows, leaseDeadline);
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
    const lease = rows[0] && this.leases.of(rows[0]);
    const deadline = () => lease?.deadline ?? leaseDeadline;
    const mayStart = () => !this.loop.stopped && Date.now() + timeoutMs + LEASE_SAFETY_MS <= deadline();
    const publish = (row: ClaimedOutboxRow) => this.publish(client, row);
    return publishBatchRows(rows, mayStart, publish, (row, error) => this.delivery.failureOf(row, error));
  }

  /** Writes a batch's outcome back, fenced by the claim's owner token, and reports what happened. */
  protected async complete(owner: string, rows: ClaimedOutboxRow[], outcome: BatchOutcome): Promise<OutboxPassResult> {
    const { deleteOnPublish } = this.options.cleanup;
    const history = { publisher: this.options.publisher.instanceId, limit: this.options.retry.historyLimit };
    const { onExpired } = this.options.publisher;
    const written = await writeOutcome(this.database, owner, outcome, deleteOnPublish, history, onExpired);
    const { marked, fenced, released } = written;
    if (fenced > 0) this.failures.leaseLost(owner, rows, fenced);
    this.report(owner, outcome);
    for (const row of outcome.expired ?? []) this.failures.messageExpired(row, onExpired);
    return { claimed: rows.length, published: marked, failed: outcome.failures.length, fenced, released };
  }

  /** Reports a batch's outcome once written: `published` event, backoff streaks, failure logs. */
  private report(owner: string, outcome: BatchOutcome): void {
    if (outcome.sent.length > 0 && this.emitter.isWatched('published')) {
      const messages = outcome.sent.map((row) => publishedEntry(row, outcome.timings?.get(row.seq)));
      this.emitter.send('published', { owner, messages });
    }
    this.delivery.batchDone(outcome);
    // Dead messages one line each; retried ones summed up, the log bounded while publishing fails (failure-log.ts).
    for (const { row, failure } of outcome.failures) this.failures.messageFailed(row, failure);
    this.failures.batchCompleted(outcome);
  }

  /**
   * Delivers one row to its destination and resolves once it succeeded: a broker (`broker:<token>`), confirmed by
   * the transport, or an `@OnOutboxEvent()` handler (`handler:<name>`), run once in its own transaction with its
   * deduplication record. A row for every destination (`''`) goes to all of its message's destinations — its broker
   * (the `client`, or the one `route.select()` picks) and each handler of its pattern (one an earlier attempt
   * applied is skipped) — and rejects with the failure that decides its fate (see `deliverToAll()`). The seam of
   * one delivery: the testing kit's `TwiceDeliveringOutboxPublisher` overrides it.
   */
  protected publish(client: ClientProxy | undefined, row: ClaimedOutboxRow): Promise<void> {
    return this.delivery.deliver(client, row);
  }
}
