import type { ClientProxy } from '@nestjs/microservices';
import type { BrokerDestination } from '../destinations/broker-destinations';
import { ALL_DESTINATIONS, ParsedDestination, parseDestination } from '../destinations/destination-names';
import type { OutboxDestinations } from '../destinations/outbox-destinations';
import { tokenName } from '../destinations/route.options-validation';
import type { ClaimedOutboxRow, OutboxFailure } from '../dialects/outbox-dialect';
import {
  OutboxCircuitOpenError,
  OutboxHandlerInFlightError,
  OutboxNoDestinationError,
  OutboxNonRetryableError,
  OutboxRouteError,
} from '../errors';
import { HANDLER_CONCURRENCY, HandlerSlots } from '../handlers/handler-slots';
import { IN_FLIGHT_GRACE_LEASES, InFlightGiveBacks } from '../handlers/in-flight-give-backs';
import type { OutboxEventHandler } from '../handlers/outbox-handler-registry';
import { runOutboxHandler } from '../handlers/run-outbox-handler';
import { runConsumerHandler } from '../handlers/run-consumer-handler';
import type { ConsumerRegistry } from '../idempotency/consumer-registry';
import type { IdempotencyService } from '../idempotency/idempotency.service';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { policyFor } from '../util/retry-policy';
import type { ResolvedRetryPolicy } from '../retry.options';
import type { OutgoingOutboxMessage } from '../transports/outbox-transport';
import { describeFailure } from '../util/describe-error';
import { errorTypeOf } from '../util/error-type';
import { retryDelay } from './backoff';
import { BrokerBreakers, type CircuitListener, type CircuitTicket } from './circuit-breaker';
import { dispatchConfirmed } from './confirm-wait';
import { DeliveryPart, deliverToAll } from './deliver-to-all';
import { startProducerSpan } from './producer-span';
import { BatchOutcome, failureOf, outgoingMessage } from './publish-pass';

/** What the publisher hears of each row's wait for its broker's confirm. */
export interface ConfirmWatch {
  /** A publish of `row` starts (`true`) or ends (`false`) waiting for its confirm. */
  waiting(row: ClaimedOutboxRow, waiting: boolean): void;
  /** The confirm of `row` is late on a connected client. */
  late(row: ClaimedOutboxRow): void;
  /** True once the publisher is stopping (a late confirm is then no longer waited for). */
  stopping(): boolean;
}

const NO_CONFIRM_WATCH: ConfirmWatch = { waiting: () => undefined, late: () => undefined, stopping: () => false };

/**
 * How the rows of one outbox reach their destinations (`OutboxDestinations`: the brokers and the
 * `@OnOutboxEvent()` handlers) and what a failed delivery means: the per-broker backoff streaks of an outage, and
 * the failure a row's delivery ends in. The publisher calls it for each row of a batch.
 */
export class RowDelivery {
  /** The broker each row of a batch in flight was published to (by `seq`), for the per-broker backoff streaks. */
  private readonly rowBrokers = new Map<string, BrokerDestination>();
  private readonly handlerSlots = new HandlerSlots(HANDLER_CONCURRENCY);
  /** Bounds the attempts given back while a handler's record is held elsewhere (a run that never returns). */
  private readonly inFlight: InFlightGiveBacks;
  /**
   * Consecutive batches that failed because the broker was unreachable, for rows whose broker is unknown: the
   * backoff of such failures grows with it (their attempts are given back, so they cannot). Reset by a batch the
   * broker confirmed.
   */
  private unreachableStreak = 0;
  /** The circuit breaker of each broker (`publisher.circuitBreaker`). */
  readonly breakers: BrokerBreakers;

  constructor(
    private readonly destinations: OutboxDestinations,
    private readonly options: ResolvedOutboxOptions,
    private readonly idempotency?: IdempotencyService,
    /** What the publisher hears of a row's wait for its broker's confirm (it keeps the lease, slows down, stops). */
    private readonly confirms: ConfirmWatch = NO_CONFIRM_WATCH,
    /** The broker consumers that retry from inbox rows (`consumer:<name>` rows). */
    private readonly consumers?: ConsumerRegistry,
    /** What a broker's breaker says when it opens or closes (the publisher logs it). */
    breakerListener: (broker: string) => CircuitListener = () => ({ opened: () => {}, closed: () => {} }),
  ) {
    this.breakers = new BrokerBreakers(options.publisher.circuitBreaker, breakerListener);
    this.inFlight = new InFlightGiveBacks(IN_FLIGHT_GRACE_LEASES * options.publisher.leaseDuration);
  }

  /**
   * Delivers one row to its destination: the one it names, or (`''`) every destination of its message, resolving
   * once every one succeeded (see `OutboxPublisher.publish()`).
   */
  async deliver(client: ClientProxy | undefined, row: ClaimedOutboxRow): Promise<void> {
    if (row.destination !== ALL_DESTINATIONS) return this.deliverTo(client, row, parseDestination(row.destination));
    const message = outgoingMessage(row);
    const parts: DeliveryPart[] = [];
    const broker = this.destinations.brokers.brokerOf(message);
    if (broker !== null) parts.push({ kind: 'broker', run: () => this.publishToBroker(client, row, message, broker) });
    for (const handler of this.destinations.handlersOf(row.pattern)) {
      parts.push(this.handlerPart(handler, row, message));
    }
    if (parts.length === 0) throw new OutboxNoDestinationError(missingDestination(row, { kind: 'all' }));
    await deliverToAll(parts);
  }

  /** Delivers a row written for one destination; `OutboxNoDestinationError` when it no longer exists. */
  private async deliverTo(
    client: ClientProxy | undefined,
    row: ClaimedOutboxRow,
    destination: ParsedDestination,
  ): Promise<void> {
    if (destination.kind === 'broker') {
      const broker = this.destinations.brokers.all.find((b) => tokenName(b.token) === destination.name);
      if (broker) return this.publishToBroker(client, row, outgoingMessage(row), broker);
    } else if (destination.kind === 'consumer') {
      const consumer = this.consumers?.get(destination.name);
      if (consumer) {
        await this.handlerSlots.run(() => runConsumerHandler(this.idempotency!, consumer, row));
        return;
      }
    } else if (destination.kind === 'handler') {
      const handler = this.destinations.handlersOf(row.pattern).find((h) => h.name === destination.name);
      if (handler) {
        await this.handlerPart(handler, row, outgoingMessage(row)).run();
        return;
      }
    }
    throw new OutboxNoDestinationError(missingDestination(row, destination));
  }

  /**
   * The delivery of a row's message to one `@OnOutboxEvent()` handler (with the row's attempts), run in a handler
   * slot (see `HandlerSlots`) once its `run()` is called. The message the handler gets is taken now.
   */
  private handlerPart(
    handler: OutboxEventHandler,
    row: ClaimedOutboxRow,
    message: OutgoingOutboxMessage,
  ): DeliveryPart {
    const handled = { ...message, attempts: row.attempts };
    return {
      kind: 'handler',
      run: () => this.handlerSlots.run(() => runOutboxHandler(this.idempotency!, handler, handled)),
    };
  }

  /** Whether broker consumers retry from inbox rows here (they are destinations: the outbox has somewhere to deliver). */
  get hasConsumers(): boolean {
    return (this.consumers?.size ?? 0) > 0;
  }

  /** What a failed delivery means for its row (see `OutboxPublisher.toFailure()`). */
  failureOf(row: ClaimedOutboxRow, error: unknown): OutboxFailure {
    if (error instanceof OutboxCircuitOpenError) {
      // Not sent at all: the attempt is given back and the row waits out the cool-down.
      const failure = { error: describeFailure(error), dead: false, retryDelay: error.retryAfterMs };
      return { seq: row.seq, ...failure, transportUnreachable: true, errorType: errorTypeOf(error) };
    }
    // Held past the grace: counted, as a handler failure. Tracked per row (message and destination): each handler's
    // row of a message has its own episode.
    error = this.inFlight.judge(`${row.messageId}\u0000${row.destination}`, error);
    if (error instanceof OutboxHandlerInFlightError) {
      // Not the message's failure: the attempt is given back (as for an unreachable broker) and retried later.
      const { seq, attempts } = row;
      const errorType = errorTypeOf(error);
      const delay = retryDelay(Math.max(1, attempts - 1), this.retryOf(row));
      return {
        seq,
        error: describeFailure(error),
        dead: false,
        retryDelay: delay,
        transportUnreachable: true,
        errorType,
      };
    }
    const broker = this.rowBrokers.get(row.seq);
    const connected = broker?.client.connected;
    const unreachableStreak = broker?.unreachableStreak ?? this.unreachableStreak;
    return failureOf(row, error, this.retryOf(row), { connected, unreachableStreak });
  }

  /**
   * The retries of a row — its consumer's (`@Idempotent({ retry })`) for an inbox row, else the module's `retry` —
   * as the policy of its pattern (`retry.patterns`).
   */
  private retryOf(row: ClaimedOutboxRow): ResolvedRetryPolicy {
    const destination = parseDestination(row.destination);
    const consumer = destination.kind === 'consumer' ? this.consumers?.get(destination.name) : undefined;
    return policyFor(consumer ? consumer.retry : this.options.retry, row.pattern);
  }

  /**
   * After a batch, per broker: one in which it confirmed a message resets its unreachable streak; one in which it
   * took none and could not be reached grows it. A broker that is down so backs off on its own, whatever the others
   * do.
   */
  batchDone(outcome: BatchOutcome): void {
    if (outcome.sent.length > 0) this.unreachableStreak = 0;
    else if (outcome.failures.some((f) => f.failure.transportUnreachable)) this.unreachableStreak++;
    const seen = new Map<BrokerDestination, { sent: boolean; unreachable: boolean }>();
    const note = (seq: string, sent: boolean, unreachable: boolean) => {
      const broker = this.rowBrokers.get(seq);
      this.rowBrokers.delete(seq);
      if (!broker) return;
      const entry = seen.get(broker) ?? { sent: false, unreachable: false };
      entry.sent ||= sent;
      entry.unreachable ||= unreachable;
      seen.set(broker, entry);
    };
    for (const row of outcome.sent) note(row.seq, true, false);
    for (const { row, failure } of outcome.failures) note(row.seq, false, failure.transportUnreachable === true);
    for (const row of outcome.unstarted) this.rowBrokers.delete(row.seq);
    for (const [broker, { sent, unreachable }] of seen) {
      if (sent) broker.unreachableStreak = 0;
      else if (unreachable) broker.unreachableStreak++;
    }
  }

  /**
   * Publishes one row to its broker and resolves once the transport has confirmed it — a late confirm included
   * (see `dispatchConfirmed()`) — or rejects on error or an unknown outcome, in a `PRODUCER` span when the row carries a trace context (see `startProducerSpan()`).
   */
  private async publishToBroker(
    client: ClientProxy | undefined,
    row: ClaimedOutboxRow,
    message: OutgoingOutboxMessage,
    broker: BrokerDestination | OutboxRouteError,
  ): Promise<void> {
    if (broker instanceof OutboxRouteError) throw broker;
    const ticket = await this.admit(row, broker);
    let sending = false;
    try {
      this.rowBrokers.set(row.seq, broker);
      await this.send(client, row, message, broker, () => (sending = true));
    } catch (error) {
      // Only the send's own failures count against the broker, not a record its transport could not build. A
      // ticket is always settled: a probe left open would hold the broker's other publishes.
      if (sending && !(error instanceof OutboxNonRetryableError)) ticket?.failed();
      else ticket?.ignored();
      throw error;
    }
    ticket?.succeeded();
  }

  /** Builds the row's record and sends it, in a `PRODUCER` span; `sending()` is called once the send starts. */
  private async send(
    client: ClientProxy | undefined,
    row: ClaimedOutboxRow,
    message: OutgoingOutboxMessage,
    broker: BrokerDestination,
    sending: () => void,
  ): Promise<void> {
    const transport = broker.client.transport!;
    const target = this.options.route || !client ? this.destinations.brokers.clientOf(broker) : client;
    const span = startProducerSpan(message, transport.name);
    try {
      const record = transport.toRecord(message);
      const { publishTimeout, maxConfirmWait } = this.options.publisher;
      this.confirms.waiting(row, true);
      sending();
      try {
        await dispatchConfirmed(target, row.pattern, record, {
          publishTimeout,
          maxConfirmWait,
          connected: () => broker.client.connected,
          late: () => this.confirms.late(row),
          stopping: this.confirms.stopping,
        });
      } finally {
        this.confirms.waiting(row, false);
      }
    } catch (error) {
      span?.fail(error);
      throw error;
    }
    span?.end();
  }

  /**
   * Lets a publish to `broker` through its circuit breaker (none when breakers are off): rejects with
   * `OutboxCircuitOpenError` while it is open; while its probe runs, waits for the probe's outcome, the row's
   * lease kept as for a confirm.
   */
  private async admit(row: ClaimedOutboxRow, broker: BrokerDestination): Promise<CircuitTicket | undefined> {
    const name = tokenName(broker.token);
    const breaker = this.breakers.of(name);
    if (!breaker) return undefined;
    this.confirms.waiting(row, true);
    try {
      return await breaker.admit(name);
    } finally {
      this.confirms.waiting(row, false);
    }
  }
}

/** The text of `OutboxNoDestinationError` for a row whose destination the app no longer has, with the fix. */
export function missingDestination(
  row: Pick<ClaimedOutboxRow, 'messageId' | 'pattern' | 'destination'>,
  destination: ParsedDestination,
): string {
  if (destination.kind === 'all') {
    return (
      `Message ${row.messageId} (pattern '${row.pattern}') has no destination: no broker (no \`client\`, or ` +
      `\`route.select()\` returned null) and no @OnOutboxEvent('${row.pattern}') handler. Add the handler (or ` +
      'route it to a broker), then requeue it.'
    );
  }
  const what = `Message ${row.messageId} (pattern '${row.pattern}') was written for the destination '${row.destination}'`;
  switch (destination.kind) {
    case 'broker':
      return (
        `${what}, but this outbox has no broker client named ${destination.name} (not its \`client\` nor in ` +
        '`route.clients`). Add the client back (a ClientsModule client with that token) and requeue the row once it ' +
        'went dead, or purge it if that broker is gone for good.'
      );
    case 'consumer':
      return (
        `${what}, an inbox row of the broker consumer ${destination.name}, but this process has no @EventPattern ` +
        `consumer ${destination.name} under @Idempotent({ retry }). Run the publisher in the process that hosts the ` +
        'consumer (or add it back), then requeue the row once it went dead, or purge it.'
      );
    case 'handler':
      return (
        `${what}, but no @OnOutboxEvent('${row.pattern}') handler is named '${destination.name}' in this outbox. ` +
        `Add it back (@OnOutboxEvent('${row.pattern}', { name: '${destination.name}' })) and requeue the row once ` +
        'it went dead, or purge it if that handler is gone for good.'
      );
    default:
      return (
        `${what}, which this version does not know (expected '', 'broker:<token>' or 'handler:<name>'). Publish ` +
        'it with the version that wrote it, or purge it.'
      );
  }
}
