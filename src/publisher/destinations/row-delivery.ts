import type { ModuleRef } from '@nestjs/core';
import type { ClientProxy } from '@nestjs/microservices';
import type { ClaimedOutboxRow, NewOutboxRow, OutboxFailure } from '../../dialects/outbox-dialect';
import {
  OutboxConfigurationError,
  OutboxHandlerInFlightError,
  OutboxNoDestinationError,
  OutboxRouteError,
} from '../../errors';
import { HANDLER_CONCURRENCY, HandlerSlots } from '../../handlers/handler-slots';
import { IN_FLIGHT_GRACE_LEASES, InFlightGiveBacks } from '../../handlers/in-flight-give-backs';
import type { OutboxEventHandler, OutboxHandlerRegistry } from '../../handlers/outbox-handler-registry';
import { runOutboxHandler } from '../../handlers/run-outbox-handler';
import type { IdempotencyService } from '../../idempotency/idempotency.service';
import type { ResolvedOutboxOptions } from '../../outbox.options';
import type { OutgoingOutboxMessage } from '../../transports/outbox-transport';
import { describeFailure } from '../../util/describe-error';
import { errorTypeOf } from '../../util/error-type';
import { retryDelay } from '../backoff';
import { startProducerSpan } from '../producer-span';
import { dispatchConfirmed } from '../confirm-wait';
import { BatchOutcome, failureOf, outgoingMessage } from '../publish-pass';
import { BrokerDestination, BrokerDestinations } from './broker-destinations';
import { DeliveryPart, deliverToAll } from './deliver-to-all';
import {
  ALL_DESTINATIONS,
  brokerDestination,
  handlerDestination,
  ParsedDestination,
  parseDestination,
} from './destination-names';
import { tokenName } from './route.options-validation';

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

/** The destinations of a message written as one row for every destination. */
const EVERY_DESTINATION: readonly string[] = Object.freeze([ALL_DESTINATIONS]);

/**
 * Where the rows of one outbox go and what a failed delivery means: the brokers (none, the `client`, or the
 * `route.clients`) and the `@OnOutboxEvent()` handlers, the per-broker backoff streaks of an outage, and the
 * failure a row's delivery ends in. The publisher calls it for each row of a batch.
 */
export class RowDelivery {
  readonly brokers: BrokerDestinations;
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

  constructor(
    moduleRef: ModuleRef,
    private readonly options: ResolvedOutboxOptions,
    private readonly handlers?: OutboxHandlerRegistry,
    private readonly idempotency?: IdempotencyService,
    /** What the publisher hears of a row's wait for its broker's confirm (it keeps the lease, slows down, stops). */
    private readonly confirms: ConfirmWatch = NO_CONFIRM_WATCH,
  ) {
    this.brokers = new BrokerDestinations(moduleRef, options);
    this.inFlight = new InFlightGiveBacks(IN_FLIGHT_GRACE_LEASES * options.publisher.leaseDuration);
  }

  /**
   * The destinations a message is written to, one row each (see `destination-names.ts`): the broker
   * `route.select()` returns (or the `client`) and each `@OnOutboxEvent()` handler of its pattern. One row for every
   * destination (`['']`, delivered as in earlier versions) when that is the same: the outbox has no `route` and the
   * message at most one destination. Also `['']` when `route.select()` fails here: it runs again at publish time,
   * where its error is retried and dead-lettered (never lost).
   */
  destinationsOf(message: Pick<NewOutboxRow, 'messageId' | 'pattern' | 'key' | 'headers'>): readonly string[] {
    const handlers = this.handlers?.handlersOf(message.pattern) ?? [];
    if (!this.options.route) {
      const broker = this.brokers.primary;
      if ((broker ? 1 : 0) + handlers.length <= 1) return EVERY_DESTINATION;
      const names = handlers.map((h) => handlerDestination(h.name));
      return broker ? [brokerDestination(broker.token), ...names] : names;
    }
    let broker: BrokerDestination | null;
    try {
      const { messageId, pattern, key } = message;
      const headers = message.headers ? (JSON.parse(message.headers) as Record<string, string>) : {};
      broker = this.brokers.select({ messageId, pattern, key, headers });
    } catch (error) {
      if (error instanceof OutboxRouteError) return EVERY_DESTINATION;
      throw error;
    }
    const names = handlers.map((h) => handlerDestination(h.name));
    if (broker) names.unshift(brokerDestination(broker.token));
    return names.length === 0 ? EVERY_DESTINATION : names;
  }

  /**
   * Delivers one row to its destination: the one it names, or (`''`) every destination of its message, resolving
   * once every one succeeded (see `OutboxPublisher.publish()`).
   */
  async deliver(client: ClientProxy | undefined, row: ClaimedOutboxRow): Promise<void> {
    if (row.destination !== ALL_DESTINATIONS) return this.deliverTo(client, row, parseDestination(row.destination));
    const message = outgoingMessage(row);
    const parts: DeliveryPart[] = [];
    const broker = this.brokerOf(message);
    if (broker !== null) parts.push({ kind: 'broker', run: () => this.publishToBroker(client, row, message, broker) });
    for (const handler of this.handlers?.handlersOf(row.pattern) ?? []) {
      parts.push(this.handlerPart(handler, row, message));
    }
    if (parts.length === 0) {
      throw new OutboxNoDestinationError(
        `Message ${row.messageId} (pattern '${row.pattern}') has no destination: no broker (no \`client\`, or ` +
          `\`route.select()\` returned null) and no @OnOutboxEvent('${row.pattern}') handler. Add the handler (or ` +
          'route it to a broker), then requeue it.',
      );
    }
    await deliverToAll(parts);
  }

  /** Delivers a row written for one destination; `OutboxNoDestinationError` when it no longer exists. */
  private async deliverTo(
    client: ClientProxy | undefined,
    row: ClaimedOutboxRow,
    destination: ParsedDestination,
  ): Promise<void> {
    if (destination.kind === 'broker') {
      const broker = this.brokers.all.find((b) => tokenName(b.token) === destination.name);
      if (broker) return this.publishToBroker(client, row, outgoingMessage(row), broker);
    } else if (destination.kind === 'handler') {
      const handler = this.handlers?.handlersOf(row.pattern).find((h) => h.name === destination.name);
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

  /** What a failed delivery means for its row (see `OutboxPublisher.toFailure()`). */
  failureOf(row: ClaimedOutboxRow, error: unknown): OutboxFailure {
    // Held past the grace: counted, as a handler failure. Tracked per row (message and destination): each handler's
    // row of a message has its own episode.
    error = this.inFlight.judge(`${row.messageId}\u0000${row.destination}`, error);
    if (error instanceof OutboxHandlerInFlightError) {
      // Not the message's failure: the attempt is given back (as for an unreachable broker) and retried later.
      const { seq, attempts } = row;
      const errorType = errorTypeOf(error);
      const delay = retryDelay(Math.max(1, attempts - 1), this.options.retry);
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
    return failureOf(row, error, this.options.retry, { connected, unreachableStreak });
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
   * Fails when the outbox has nowhere to deliver: no `client`, no `route` and no `@OnOutboxEvent()` handler
   * (`OutboxConfigurationError` naming the fix).
   */
  checkConfigured(): void {
    if (this.brokers.configured || (this.handlers?.size ?? 0) > 0) return;
    throw new OutboxConfigurationError(
      'OutboxModule has nowhere to deliver messages: no `client`, no `route` and no @OnOutboxEvent() handler. ' +
        "Pass `client: <token of a ClientsModule client>` to forRoot() (e.g. ClientsModule.register([{ name: 'BROKER', " +
        "transport: Transport.RMQ, options }]) and `client: 'BROKER'`), add an @OnOutboxEvent() handler, or set " +
        '`publisher: { enabled: false }` in processes that do not publish.',
    );
  }

  /**
   * The broker of a message: `null` when it has none (no `client` nor `route`, or `route.select()` returned null),
   * an `OutboxRouteError` (thrown when the broker part runs) when select() failed.
   */
  private brokerOf(message: OutgoingOutboxMessage): BrokerDestination | OutboxRouteError | null {
    if (!this.brokers.configured) return null;
    const { messageId, pattern, key, headers } = message;
    try {
      return this.brokers.select({ messageId, pattern, key, headers });
    } catch (error) {
      if (error instanceof OutboxRouteError) return error;
      throw error;
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
    this.rowBrokers.set(row.seq, broker);
    const transport = broker.client.transport!;
    const target = this.options.route || !client ? this.brokers.clientOf(broker) : client;
    const span = startProducerSpan(message, transport.name);
    try {
      const record = transport.toRecord(message);
      const { publishTimeout, maxConfirmWait } = this.options.publisher;
      this.confirms.waiting(row, true);
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
}

/** The text of `OutboxNoDestinationError` for a row whose destination the app no longer has, with the fix. */
function missingDestination(row: ClaimedOutboxRow, destination: ParsedDestination): string {
  const what = `Message ${row.messageId} (pattern '${row.pattern}') was written for the destination '${row.destination}'`;
  switch (destination.kind) {
    case 'broker':
      return (
        `${what}, but this outbox has no broker client named ${destination.name} (not its \`client\` nor in ` +
        '`route.clients`). Add the client back (a ClientsModule client with that token) and requeue the row once it ' +
        'went dead, or purge it if that broker is gone for good.'
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
