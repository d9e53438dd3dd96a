import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type { Attributes, BatchObservableCallback, Counter, Histogram, Meter, Observable } from '@opentelemetry/api';
import { OutboxDatabase } from '../dialects/outbox-database';
import type {
  OutboxDeadEvent,
  OutboxExpiredEvent,
  OutboxLeaseLostEvent,
  OutboxPublishedEvent,
  OutboxRequeuedEvent,
  OutboxRetryEvent,
} from '../events/publisher-events';
import { OUTBOX_OPTIONS } from '../outbox.constants';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { OutboxPublisher } from '../publisher/outbox-publisher';
import { parseDestination } from '../destinations/destination-names';
import type { CircuitState } from '../publisher/circuit-breaker';
import { messagingSystem } from '../publisher/producer-span';
import { runOnConnection } from '../transaction/transaction-runner';
import { describeError } from '../util/describe-error';
import { loadOpenTelemetry } from '../util/opentelemetry';
import { countIdempotencyOutcomes } from './idempotency-metrics';
import { DELAY_BUCKETS, DURATION_BUCKETS, OUTBOX_METER, OUTBOX_METRICS } from './metric-names';

/** The value of `outbox.relay.breaker.state` for each state. */
const BREAKER_STATE_VALUE: Record<CircuitState, number> = { closed: 0, 'half-open': 1, open: 2 };

/** The relay's instruments. */
interface RelayInstruments {
  sent: Counter;
  handlerRuns: Counter;
  duration: Histogram;
  delay: Histogram;
  retried: Counter;
  deadLettered: Counter;
  requeued: Counter;
  leaseLost: Counter;
  expired: Counter;
  brokerSlow: Observable;
  breakerState: Observable;
  wal: { lag: Observable; retained: Observable };
  backlog: { pending: Observable; due: Observable; inFlight: Observable; dead: Observable; oldestAge: Observable };
}

/**
 * The relay's OpenTelemetry metrics (meter `nestjs-outbox`; see `OUTBOX_METRICS`): counters and histograms fed by the
 * publisher's events (`published`, `retry`, `dead`, `requeued`, `leaseLost`), and the backlog as observable gauges
 * read together, at each collection, with one indexed query (`stats()`). Does nothing when `metrics` is off or
 * `@opentelemetry/api` is not installed. One per `OutboxModule` import: every point it records carries
 * `outbox.data_source` (the DataSource's name, `default` for the default one), so the series of two outboxes
 * sharing a meter never add up. Also counts `@Idempotent()` outcomes (`countIdempotencyOutcomes()`).
 */
@Injectable()
export class OutboxMetrics implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('OutboxMetrics');
  private stop?: () => void;

  constructor(
    @Inject(OUTBOX_OPTIONS) private readonly options: ResolvedOutboxOptions,
    private readonly database: OutboxDatabase,
    private readonly publisher: OutboxPublisher,
  ) {}

  async onModuleInit(): Promise<void> {
    if (!this.options.metrics.enabled) return;
    const api = await loadOpenTelemetry();
    if (!api) return;
    const provider = this.options.metrics.meterProvider ?? api.metrics.getMeterProvider();
    const meter = provider.getMeter(OUTBOX_METER) as Meter;
    const instruments = this.createInstruments(meter);
    const listeners = this.listen(instruments);
    const idempotency = countIdempotencyOutcomes(meter);
    const { pending, due, inFlight, dead, oldestAge } = instruments.backlog;
    const observe: BatchObservableCallback = (result) => this.observeBacklog(result, instruments);
    meter.addBatchObservableCallback(observe, [pending, due, inFlight, dead, oldestAge]);
    const attributes = this.outboxAttributes();
    const observeSlow = (result: { observe(value: number, attributes?: Attributes): void }) =>
      result.observe(this.publisher.brokerSlow ? 1 : 0, attributes);
    instruments.brokerSlow.addCallback(observeSlow);
    const observeBreakers = (result: { observe(value: number, attributes?: Attributes): void }) => {
      for (const { broker, state } of this.publisher.circuits) {
        result.observe(BREAKER_STATE_VALUE[state], { ...attributes, 'outbox.broker': broker });
      }
    };
    instruments.breakerState.addCallback(observeBreakers);
    const walGauges = [instruments.wal.lag, instruments.wal.retained];
    const observeWal: BatchObservableCallback = async (result) => {
      const lag = await this.publisher.walLag().catch(() => undefined);
      if (!lag) return;
      result.observe(instruments.wal.lag, lag.lagBytes, attributes);
      result.observe(instruments.wal.retained, lag.retainedBytes, attributes);
    };
    meter.addBatchObservableCallback(observeWal, walGauges);
    this.stop = () => {
      meter.removeBatchObservableCallback(observe, [pending, due, inFlight, dead, oldestAge]);
      meter.removeBatchObservableCallback(observeWal, walGauges);
      instruments.brokerSlow.removeCallback(observeSlow);
      instruments.breakerState.removeCallback(observeBreakers);
      listeners();
      idempotency();
    };
  }

  onModuleDestroy(): void {
    this.stop?.();
    this.stop = undefined;
  }

  private createInstruments(meter: Meter): RelayInstruments {
    const M = OUTBOX_METRICS;
    const messages = (description: string) => ({ unit: '{message}', description });
    return {
      sent: meter.createCounter(M.sentMessages, messages('Publish attempts of outbox messages (error.type: failed)')),
      handlerRuns: meter.createCounter(M.handlerRuns, {
        unit: '{run}',
        description: 'Runs of in-process @OnOutboxEvent() handlers from the outbox (error.type: failed)',
      }),
      duration: meter.createHistogram(M.operationDuration, {
        unit: 's',
        description: 'Duration of a publish, until the broker confirmed it or it failed',
        advice: { explicitBucketBoundaries: DURATION_BUCKETS },
      }),
      delay: meter.createHistogram(M.publishDelay, {
        unit: 's',
        description: 'From the commit that wrote an outbox message to the broker confirming it',
        advice: { explicitBucketBoundaries: DELAY_BUCKETS },
      }),
      retried: meter.createCounter(M.retried, messages('Failed publish attempts rescheduled with backoff')),
      deadLettered: meter.createCounter(M.deadLettered, messages('Outbox messages moved to the dead letters')),
      requeued: meter.createCounter(M.requeued, messages('Dead outbox messages made pending again')),
      leaseLost: meter.createCounter(M.leaseLost, messages('Messages whose claim was taken over before being marked')),
      expired: meter.createCounter(M.expired, messages('Outbox messages not published because they expired first')),
      brokerSlow: meter.createObservableGauge(M.brokerSlow, {
        unit: '1',
        description: '1 while the broker confirms later than publishTimeout (the relay waits, with smaller batches)',
      }),
      breakerState: meter.createObservableGauge(M.breakerState, {
        unit: '1',
        description:
          "A broker's circuit breaker in this process: 0 closed, 1 half-open, 2 open (publisher.circuitBreaker)",
      }),
      wal: {
        lag: meter.createObservableGauge(M.walSlotLag, {
          unit: 'By',
          description: "WAL the outbox's replication slot has not yet acknowledged (publisher.mode 'wal')",
        }),
        retained: meter.createObservableGauge(M.walRetained, {
          unit: 'By',
          description: "WAL the server retains for the outbox's replication slot (publisher.mode 'wal')",
        }),
      },
      backlog: {
        pending: meter.createObservableGauge(M.pending, messages('Outbox messages waiting to be published')),
        due: meter.createObservableGauge(M.due, messages('Pending outbox messages due now and not claimed')),
        inFlight: meter.createObservableGauge(M.inFlight, messages('Pending outbox messages claimed by a publisher')),
        dead: meter.createObservableGauge(M.dead, messages('Dead outbox messages')),
        oldestAge: meter.createObservableGauge(M.oldestPendingAge, {
          unit: 's',
          description: 'Age of the oldest pending outbox message (database clock)',
        }),
      },
    };
  }

  /** Subscribes the counters and histograms to the publisher's events; returns the unsubscribe. */
  private listen(i: RelayInstruments): () => void {
    const outbox = this.outboxAttributes();
    /**
     * A handler row's run — or an inbox row's, a broker consumer run again — is counted as a handler run, not as a
     * broker send: the name, or undefined for a send.
     */
    const handlerOf = (destination: string) => {
      const parsed = parseDestination(destination);
      return parsed.kind === 'handler' || parsed.kind === 'consumer' ? parsed.name : undefined;
    };
    const handlerRun = (pattern: string, handler: string, errorType?: string) =>
      i.handlerRuns.add(1, {
        ...outbox,
        'messaging.destination.name': pattern,
        'outbox.handler.name': handler,
        ...(errorType === undefined ? {} : { 'error.type': errorType }),
      });
    const published = ({ messages }: OutboxPublishedEvent) => {
      for (const m of messages) {
        const handler = handlerOf(m.destination);
        if (handler !== undefined) {
          handlerRun(m.pattern, handler);
          continue;
        }
        const attributes = this.messageAttributes(m.pattern);
        i.sent.add(1, attributes);
        if (m.publishDurationMs !== undefined) i.duration.record(m.publishDurationMs / 1000, attributes);
        if (m.delayMs !== undefined) {
          i.delay.record(m.delayMs / 1000, { ...outbox, 'messaging.destination.name': m.pattern });
        }
      }
    };
    const failed = (e: OutboxRetryEvent | OutboxDeadEvent) => {
      const errorType = e.errorType ?? '_OTHER';
      const handler = handlerOf(e.destination);
      if (handler !== undefined) handlerRun(e.pattern, handler, errorType);
      else {
        const attributes = { ...this.messageAttributes(e.pattern), 'error.type': errorType };
        i.sent.add(1, attributes);
        if (e.publishDurationMs !== undefined) i.duration.record(e.publishDurationMs / 1000, attributes);
      }
      return { ...outbox, 'messaging.destination.name': e.pattern, 'error.type': errorType };
    };
    const retry = (e: OutboxRetryEvent) =>
      i.retried.add(1, { ...failed(e), 'outbox.transport_unreachable': e.transportUnreachable });
    const dead = (e: OutboxDeadEvent) => i.deadLettered.add(1, failed(e));
    const requeued = ({ patterns }: OutboxRequeuedEvent) => {
      for (const { pattern, count } of patterns) {
        i.requeued.add(count, { ...outbox, 'messaging.destination.name': pattern });
      }
    };
    const leaseLost = ({ lost }: OutboxLeaseLostEvent) => i.leaseLost.add(lost, outbox);
    const expired = ({ pattern, outcome }: OutboxExpiredEvent) =>
      i.expired.add(1, { ...outbox, 'messaging.destination.name': pattern, 'outbox.expired.outcome': outcome });
    const p = this.publisher;
    p.on('published', published).on('retry', retry).on('dead', dead);
    p.on('requeued', requeued).on('leaseLost', leaseLost).on('expired', expired);
    return () => {
      p.off('published', published).off('retry', retry).off('dead', dead).off('requeued', requeued);
      p.off('leaseLost', leaseLost).off('expired', expired);
    };
  }

  /** What tells this outbox's points from another's: its DataSource's name. */
  private outboxAttributes(): Attributes {
    return { 'outbox.data_source': this.database.name };
  }

  private messageAttributes(pattern: string): Attributes {
    const transport = this.publisher.transportName;
    return {
      ...this.outboxAttributes(),
      'messaging.operation.name': 'send',
      'messaging.operation.type': 'send',
      'messaging.destination.name': pattern,
      ...(transport ? { 'messaging.system': messagingSystem(transport) } : {}),
    };
  }

  /** One `stats()` query for the five gauges; a failing query skips this collection (logged at debug). */
  private async observeBacklog(
    result: Parameters<BatchObservableCallback>[0],
    { backlog }: RelayInstruments,
  ): Promise<void> {
    const { dataSource, dialect, table } = this.database;
    try {
      const stats = await runOnConnection(dataSource, (m) => dialect.stats(m, table));
      const attributes = this.outboxAttributes();
      result.observe(backlog.pending, stats.pending, attributes);
      result.observe(backlog.due, stats.due, attributes);
      result.observe(backlog.inFlight, stats.inFlight, attributes);
      result.observe(backlog.dead, stats.dead, attributes);
      result.observe(backlog.oldestAge, stats.oldestPendingAgeMs / 1000, attributes);
    } catch (error) {
      this.logger.debug?.(`The outbox backlog could not be read for metrics: ${describeError(error)}`);
    }
  }
}
