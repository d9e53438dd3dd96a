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
import type { Subscription } from 'rxjs';
import { SchedulerRegistry } from '@nestjs/schedule';
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { ClaimedOutboxRow, OutboxFailure } from '../dialects/outbox-dialect';
import { PostgresWakeup } from '../dialects/postgres/postgres.wakeup';
import { OutboxConfigurationError, OutboxNonRetryableError, OutboxPublishTimeoutError } from '../errors';
import { OUTBOX_OPTIONS, OUTBOX_PUBLISHER_JOB } from '../outbox.constants';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { OutboxDatabase } from '../dialects/outbox-database';
import { SerialQueue } from '../util/serial-queue';
import { outsideTransactionContext } from '../transaction/transaction-context';
import { runOnConnection } from '../transaction/transaction-runner';
import { dispatchEvent } from '../transports/dispatch';
import type { OutboxTransport } from '../transports/outbox-transport';
import { resolveTransport } from '../transports/resolve-transport';
import { isDisconnectedStatus, isTransportUnreachable } from '../transports/transport-unreachable';
import { describeError, describeFailure } from '../util/describe-error';
import { retryDelay } from './backoff';
import type { OutboxPublisherEvents } from '../events/publisher-events';
import { hasChannelSubscribers, publishToChannel } from '../events/outbox-channels';
import { stopRegisteredInterval } from '../scheduling/registered-interval';

/** Outcome of one publish pass. */
export interface OutboxPassResult {
  claimed: number;
  published: number;
  failed: number;
  /** Rows whose claim was taken over by another publisher before this one could mark them (lease lost). */
  fenced: number;
  /** Claimed rows released unstarted (shutdown, a failed earlier message of their key, or too little lease left). */
  released: number;
}

/** What happened to the rows of one claimed batch. */
interface BatchOutcome {
  sent: ClaimedOutboxRow[];
  failures: Array<{ row: ClaimedOutboxRow; failure: OutboxFailure }>;
  unstarted: ClaimedOutboxRow[];
}

/** A batch claimed under one owner token. */
interface ClaimedBatch {
  owner: string;
  rows: ClaimedOutboxRow[];
  /** Local time by which the lease has surely ended (a conservative bound of the database's lease end). */
  leaseDeadline: number;
}

/** Margin kept between the end of the longest possible publish and the end of the lease. */
const LEASE_SAFETY_MS = 500;
/** While publishing keeps failing with the same error, one summary warning at most this often. */
const SAME_FAILURE_LOG_INTERVAL_MS = 30_000;
/** Whatever the errors, never more than one publish-failure warning this often (a flapping broker stays quiet). */
const MIN_FAILURE_LOG_INTERVAL_MS = 5_000;

/** Failed publish attempts (retried ones) not yet reported in a warning. */
interface UnreportedFailures {
  attempts: number;
  batches: number;
  firstError: string;
  minDelay: number;
  maxDelay: number;
}

/**
 * Relays due outbox rows to the broker. Each pass claims a batch (an exclusive claim under row locks, with a lease
 * computed on the database clock and a per-pass owner token), publishes it concurrently — a key's rows one after
 * another, in order, different keys and unkeyed rows in parallel — waits for every confirmation (bounded by
 * `publishTimeout`), then marks the batch in one statement per outcome, fenced by the owner token: failures are
 * rescheduled with backoff or marked dead; rows not started are released.
 *
 * The loop is registered in `SchedulerRegistry` (when `ScheduleModule.forRoot()` is imported) under
 * `nestjs-outbox:publisher`; it runs one claim at a time and keeps up to `maxBatchesInFlight` claimed batches awaiting
 * confirmations (claimed rows stay exclusive, so order and exclusivity hold). Commits wake it at once; on PostgreSQL other replicas are woken
 * by LISTEN/NOTIFY. Steps are `protected` so they can be overridden.
 *
 * Events (`publisher.on(name, listener)`): `leaseLost`, `dead`, `retry` — see `OutboxPublisherEvents`.
 */
@Injectable()
export class OutboxPublisher implements OnApplicationBootstrap, OnModuleDestroy {
  protected readonly logger = new Logger('OutboxPublisher');
  protected readonly events = new EventEmitter();
  /** Identifies this process's publisher (its own NOTIFYs are ignored). */
  readonly instanceId = randomUUID();
  private readonly passes = new SerialQueue();
  private client?: ClientProxy;
  private transport?: OutboxTransport;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  /** Batches claimed by the loop whose publishes or completion writes are still running. */
  private readonly inFlight = new Set<Promise<void>>();
  /** The loop's claim in progress (at most one at a time). */
  private claiming?: Promise<void>;
  /** A pass was asked for (poll, wake-up, a full batch, a batch that may have unblocked keys). */
  private wanted = false;
  private wakeScheduled = false;
  private failingSince?: number;
  private lastFailureLog = 0;
  /** Publish failures (broker unreachable, timeouts): start of the current episode and what is still unreported. */
  private publishFailingSince?: number;
  private publishFailuresInEpisode = 0;
  private publishEpisodeWarned = false;
  private lastPublishWarnAt = 0;
  private lastPublishWarnError?: string;
  private unreported?: UnreportedFailures;
  private wakeup?: PostgresWakeup;
  /** The client's last reported connection status (Nest's `ClientProxy.status`), when it reports one. */
  private clientStatus?: string;
  private statusSubscription?: Subscription;
  /**
   * Consecutive batches that failed because the broker was unreachable: the backoff of such failures grows with it
   * (their attempts are given back, so they cannot). Reset by a batch the broker confirmed.
   */
  private unreachableStreak = 0;

  constructor(
    @Inject(OUTBOX_OPTIONS) protected readonly options: ResolvedOutboxOptions,
    protected readonly database: OutboxDatabase,
    protected readonly moduleRef: ModuleRef,
    @Optional() protected readonly schedulerRegistry?: SchedulerRegistry,
  ) {
    this.events.on('error', (error) => this.logger.error(`An outbox event listener failed: ${describeError(error)}`));
  }

  /** Name of the loop in `SchedulerRegistry`. */
  get jobName(): string {
    const ds = this.database.name;
    return ds && ds !== 'default' ? `${OUTBOX_PUBLISHER_JOB}:${ds}` : OUTBOX_PUBLISHER_JOB;
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

  protected emitEvent<E extends keyof OutboxPublisherEvents>(event: E, payload: OutboxPublisherEvents[E]): void {
    try {
      publishToChannel(event, payload);
      this.events.emit(event, payload);
    } catch (error) {
      this.logger.error(`A '${event}' listener threw: ${describeError(error)}`);
    }
  }

  async onApplicationBootstrap(): Promise<void> {
    if (this.options.client !== undefined) this.resolveClient();
    const { dataSource, dialect, table } = this.database;
    await runOnConnection(dataSource, (m) => dialect.prepare(m, table));
    if (this.database.dialect.name === 'postgres' && this.options.publisher.notify) {
      this.wakeup = new PostgresWakeup(this.database.dataSource, this.database.table, this.instanceId);
      if (this.options.publisher.enabled) void this.wakeup.listen(() => this.trigger());
    }
    if (!this.options.publisher.enabled) return;
    if (this.schedulerRegistry?.doesExist('interval', this.jobName)) {
      throw new OutboxConfigurationError(
        `An interval named '${this.jobName}' is already registered in SchedulerRegistry. ` +
          'Import OutboxModule once per DataSource.',
      );
    }
    this.stopped = false;
    // Not unref()ed: like an @nestjs/schedule interval, the loop keeps a publisher-only worker alive until the app
    // closes (onModuleDestroy clears it).
    this.timer = setInterval(() => this.trigger(), this.options.publisher.pollingInterval);
    this.schedulerRegistry?.addInterval(this.jobName, this.timer);
    this.trigger();
  }

  /**
   * Stops claiming, lets the publishes in flight settle and releases the claimed rows that were not started —
   * all before `ClientsModule` closes its clients (in `onApplicationShutdown`).
   */
  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    if (this.timer) {
      stopRegisteredInterval(this.schedulerRegistry, this.jobName, this.timer);
      this.timer = undefined;
    }
    await this.wakeup?.close();
    await this.claiming;
    await Promise.all([...this.inFlight]);
    this.statusSubscription?.unsubscribe();
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
    if (this.wakeup && (this.stopped || !this.options.publisher.enabled || this.inFlight.size >= this.options.publisher.maxBatchesInFlight)) {
      this.wakeup.notify();
    }
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
    if (this.stopped) return;
    this.wanted = true;
    this.pump();
  }

  private pump(): void {
    const limit = this.options.publisher.maxBatchesInFlight;
    if (!this.wanted || this.claiming || this.stopped || this.inFlight.size >= limit) return;
    this.wanted = false;
    this.claiming = outsideTransactionContext(() => this.launch()).finally(() => {
      this.claiming = undefined;
      this.pump();
    });
  }

  /** Claims one batch for the loop and lets it publish and complete in the background. */
  private async launch(): Promise<void> {
    let claim: ClaimedBatch | undefined;
    try {
      claim = await this.claimBatch();
      this.recovered();
    } catch (error) {
      this.wanted = false; // the next poll retries; no tight loop while the database is down
      this.reportPassFailure(error);
      return;
    }
    if (!claim) return;
    if (claim.rows.length >= this.options.publisher.batchSize) this.wanted = true;
    const keyed = claim.rows.some((r) => r.key !== null);
    const batch: Promise<void> = this.settle(claim)
      .then(
        () => {
          // Later rows of this batch's keys waited for it: look for them now rather than at the next poll.
          if (keyed) this.wanted = true;
        },
        (error) => this.reportPassFailure(error),
      )
      .finally(() => {
        this.inFlight.delete(batch);
        this.pump();
      });
    this.inFlight.add(batch);
  }

  /** Claim, publish concurrently (in order within a key), mark. */
  protected async pass(): Promise<OutboxPassResult> {
    const claim = await this.claimBatch();
    if (!claim) return { claimed: 0, published: 0, failed: 0, fenced: 0, released: 0 };
    return this.settle(claim);
  }

  /** Claims up to `batchSize` due rows under a new owner token. */
  protected async claimBatch(): Promise<ClaimedBatch | undefined> {
    this.resolveClient();
    const { dataSource, dialect, table } = this.database;
    const owner = randomUUID();
    const { batchSize, leaseDuration } = this.options.publisher;
    // The lease ends `leaseDuration` after the database evaluated the claim, which is after this instant.
    const leaseDeadline = Date.now() + leaseDuration;
    const rows = await runOnConnection(dataSource, (m) => dialect.claim(m, { table, owner, limit: batchSize, leaseMs: leaseDuration }));
    return rows.length === 0 ? undefined : { owner, rows, leaseDeadline };
  }

  /** Publishes a claimed batch and writes its outcome back. */
  protected async settle({ owner, rows, leaseDeadline }: ClaimedBatch): Promise<OutboxPassResult> {
    await this.transport!.ready?.();
    const outcome = await this.publishBatch(this.resolveClient(), rows, leaseDeadline);
    return this.complete(owner, rows, outcome);
  }

  /**
   * Publishes a claimed batch: unkeyed rows all at once, each key's rows in sequence (a failure stops its key; the
   * rest of that key is left unstarted). A row is started only while the publisher runs and the lease has more
   * than `publishTimeout` left.
   */
  protected async publishBatch(client: ClientProxy, rows: ClaimedOutboxRow[], leaseDeadline: number): Promise<BatchOutcome> {
    const outcome: BatchOutcome = { sent: [], failures: [], unstarted: [] };
    const timeoutMs = this.options.publisher.publishTimeout;
    const mayStart = () => !this.stopped && Date.now() + timeoutMs + LEASE_SAFETY_MS <= leaseDeadline;
    const attempt = async (row: ClaimedOutboxRow): Promise<boolean> => {
      try {
        await this.publish(client, row);
        outcome.sent.push(row);
        return true;
      } catch (error) {
        outcome.failures.push({ row, failure: this.toFailure(row, error) });
        return false;
      }
    };
    const chains = new Map<string, ClaimedOutboxRow[]>();
    const work: Promise<unknown>[] = [];
    for (const row of rows) {
      if (row.key === null) {
        if (mayStart()) work.push(attempt(row));
        else outcome.unstarted.push(row);
      } else {
        const chain = chains.get(row.key);
        if (chain) chain.push(row);
        else chains.set(row.key, [row]);
      }
    }
    for (const chain of chains.values()) {
      work.push(
        (async () => {
          for (let i = 0; i < chain.length; i++) {
            if (!mayStart()) {
              outcome.unstarted.push(...chain.slice(i));
              return;
            }
            if (!(await attempt(chain[i]))) {
              outcome.unstarted.push(...chain.slice(i + 1));
              return;
            }
          }
        })(),
      );
    }
    await Promise.all(work);
    return outcome;
  }

  /** Writes a batch's outcome back, fenced by the claim's owner token, and reports what happened. */
  protected async complete(owner: string, rows: ClaimedOutboxRow[], outcome: BatchOutcome): Promise<OutboxPassResult> {
    const { dataSource, dialect, table } = this.database;
    const sentSeqs = outcome.sent.map((r) => r.seq);
    const failures = outcome.failures.map((f) => f.failure);
    const deleteOnPublish = this.options.cleanup.deleteOnPublish;
    const marked = await runOnConnection(dataSource, (m) =>
      deleteOnPublish ? dialect.deleteSent(m, table, owner, sentSeqs) : dialect.markSent(m, table, owner, sentSeqs),
    );
    const rescheduled = await runOnConnection(dataSource, (m) => dialect.markFailed(m, table, owner, failures));
    const released = await runOnConnection(dataSource, (m) =>
      dialect.release(m, table, owner, outcome.unstarted.map((r) => r.seq)),
    );
    const fenced = sentSeqs.length - marked + (failures.length - rescheduled) + (outcome.unstarted.length - released);
    if (fenced > 0) this.reportLostLease(owner, rows, fenced);
    if (outcome.sent.length > 0 && (this.events.listenerCount('published') > 0 || hasChannelSubscribers('published'))) {
      this.emitEvent('published', { owner, messages: outcome.sent.map(({ messageId, pattern, key, attempts }) => ({ messageId, pattern, key, attempts })) });
    }
    if (outcome.sent.length > 0) this.unreachableStreak = 0;
    else if (failures.some((f) => f.transportUnreachable)) this.unreachableStreak++;
    for (const { row, failure } of outcome.failures) this.reportPublishFailure(row, failure);
    this.reportBatchFailures(outcome);
    return { claimed: rows.length, published: marked, failed: failures.length, fenced, released };
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
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new OutboxPublishTimeoutError(`No confirmation within ${timeoutMs} ms (outcome unknown; will retry)`)),
        timeoutMs,
      );
    });
    try {
      await Promise.race([dispatchEvent(client, row.pattern, record), timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * What a failed publish means for its row. A broker that could not be reached (`isTransportUnreachable()`) gives
   * the attempt back and waits with backoff growing over the outage (capped at `retry.maxDelay`), however long it
   * lasts; any other failure counts toward `retry.maxAttempts` (`OutboxNonRetryableError`: dead at once). The
   * error text is redacted of credentials.
   */
  protected toFailure(row: ClaimedOutboxRow, error: unknown): OutboxFailure {
    const retry = this.options.retry;
    const text = describeFailure(error);
    const connected = this.clientStatus === undefined ? undefined : !isDisconnectedStatus(this.clientStatus);
    if (isTransportUnreachable(error, { connected })) {
      const delay = retryDelay(this.unreachableStreak + 1, retry);
      return { seq: row.seq, error: text, dead: false, retryDelay: delay, transportUnreachable: true };
    }
    const dead = error instanceof OutboxNonRetryableError || row.attempts >= retry.maxAttempts;
    return { seq: row.seq, error: text, dead, retryDelay: dead ? 0 : retryDelay(row.attempts, retry) };
  }

  protected reportPublishFailure(row: ClaimedOutboxRow, failure: OutboxFailure): void {
    if (failure.dead) {
      this.logger.error(
        `Outbox message ${row.messageId} ('${row.pattern}') is dead after ${row.attempts} attempt(s): ${failure.error}. ` +
          'List, requeue or purge it with OutboxDeadLetters.',
      );
      this.emitEvent('dead', { messageId: row.messageId, pattern: row.pattern, key: row.key, attempts: row.attempts, error: failure.error });
    } else {
      // Per message at debug only: a broker outage fails every message of the backlog, again at every retry.
      // reportBatchFailures() writes the bounded summary.
      const attempts = failure.transportUnreachable ? row.attempts - 1 : row.attempts;
      const what = failure.transportUnreachable
        ? `could not reach the broker (not counted as an attempt; ${attempts} counted so far)`
        : `failed attempt ${attempts}`;
      this.logger.debug?.(
        `Outbox message ${row.messageId} ('${row.pattern}') ${what}, ` +
          `retrying in ${failure.retryDelay} ms: ${failure.error}`,
      );
      this.emitEvent('retry', {
        messageId: row.messageId,
        pattern: row.pattern,
        attempts,
        retryDelay: failure.retryDelay,
        error: failure.error,
        transportUnreachable: failure.transportUnreachable === true,
      });
    }
  }

  /**
   * Keeps the log bounded while publishing fails (broker unreachable, timeouts): the retried failures of a batch are
   * summed up, and a warning with their count and first error goes out when an episode starts, and after that at
   * most every 30 s while the same error persists (every 5 s at most when it changes). A batch published without a
   * failure ends the episode with one recovery line. Dead messages are logged one by one by reportPublishFailure().
   */
  protected reportBatchFailures(outcome: BatchOutcome): void {
    const retried = outcome.failures.filter((f) => !f.failure.dead);
    const now = Date.now();
    if (retried.length === 0) {
      if (outcome.sent.length > 0 && this.publishFailingSince !== undefined) this.publishRecovered(now);
      return;
    }
    this.publishFailingSince ??= now;
    this.publishFailuresInEpisode += retried.length;
    const delays = retried.map((f) => f.failure.retryDelay);
    const pending = (this.unreported ??= { attempts: 0, batches: 0, firstError: retried[0].failure.error, minDelay: Infinity, maxDelay: 0 });
    pending.attempts += retried.length;
    pending.batches += 1;
    pending.minDelay = Math.min(pending.minDelay, ...delays);
    pending.maxDelay = Math.max(pending.maxDelay, ...delays);
    const error = pending.firstError;
    const since = now - this.lastPublishWarnAt;
    const interval = error === this.lastPublishWarnError ? SAME_FAILURE_LOG_INTERVAL_MS : MIN_FAILURE_LOG_INTERVAL_MS;
    if (since < interval) return;
    const delay = pending.minDelay === pending.maxDelay ? `${pending.minDelay} ms` : `${pending.minDelay}–${pending.maxDelay} ms`;
    this.logger.warn(
      `Outbox publishing is failing: ${pending.attempts} attempt(s) in ${pending.batches} batch(es) failed ` +
        `${this.publishEpisodeWarned ? 'since the last report' : 'just now'} and will be retried in ${delay} (with backoff); ` +
        `first error: ${error}. Failing for ${now - this.publishFailingSince} ms. Nothing is lost: messages stay pending ` +
        'until the broker confirms them. Check the broker and the client options; per-message detail is logged at debug level.',
    );
    this.unreported = undefined;
    this.lastPublishWarnAt = now;
    this.lastPublishWarnError = error;
    this.publishEpisodeWarned = true;
  }

  private publishRecovered(now: number): void {
    // An episode too short to have been warned about stays silent; its failures go into the next warning.
    if (this.publishEpisodeWarned) {
      const unreported = this.unreported ? ` (${this.unreported.attempts} of them since the last warning)` : '';
      this.logger.log(
        `Outbox publishing recovered after ${now - this.publishFailingSince!} ms: ${this.publishFailuresInEpisode} failed ` +
          `attempt(s) in between${unreported}, each retried.`,
      );
      this.unreported = undefined;
    }
    this.publishFailingSince = undefined;
    this.publishFailuresInEpisode = 0;
    this.publishEpisodeWarned = false;
  }

  protected reportLostLease(owner: string, rows: ClaimedOutboxRow[], lost: number): void {
    this.logger.error(
      `Lost the lease on ${lost} of ${rows.length} claimed outbox messages before marking them: another publisher took ` +
        'them over, so they may be published twice (consumers deduplicate by message id). ' +
        'Raise publisher.leaseDuration or lower publisher.publishTimeout, and check for event-loop stalls.',
    );
    this.emitEvent('leaseLost', { owner, lost, messageIds: rows.map((r) => r.messageId) });
  }

  /** Logs a failing pass (database unreachable, …) at most once a minute while it keeps failing. */
  protected reportPassFailure(error: unknown): void {
    const now = Date.now();
    this.failingSince ??= now;
    if (now - this.lastFailureLog >= 60_000) {
      this.lastFailureLog = now;
      this.logger.error(`Outbox publish pass failed (will retry on the next poll): ${describeError(error)}`);
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
    this.watchStatus(client);
    return client;
  }

  /** Follows the client's connection status (Nest 11+ `ClientProxy.status`), to classify publish timeouts. */
  private watchStatus(client: ClientProxy): void {
    type StatusSource = { subscribe?(next: (status: unknown) => void): Subscription };
    const status = (client as unknown as { status?: StatusSource }).status;
    if (typeof status?.subscribe !== 'function') return;
    this.statusSubscription = status.subscribe((value) => {
      this.clientStatus = typeof value === 'string' ? value : undefined;
    });
  }
}
