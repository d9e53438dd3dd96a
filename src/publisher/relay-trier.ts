import type { DataSource } from 'typeorm';
import type { BrokerDestination } from '../destinations/broker-destinations';
import { brokerDestination, handlerDestination, parseDestination } from '../destinations/destination-names';
import type { OutboxDestinations } from '../destinations/outbox-destinations';
import { tokenName } from '../destinations/route.options-validation';
import {
  OutboxConfigurationError,
  OutboxMessageExpiredError,
  OutboxNoDestinationError,
  OutboxRouteError,
} from '../errors';
import type { OutboxEventHandler } from '../handlers/outbox-handler-registry';
import { tryConsumerHandler } from '../handlers/run-consumer-handler';
import { tryOutboxHandler } from '../handlers/try-outbox-handler';
import type { ConsumerHandler, ConsumerRegistry } from '../idempotency/consumer-registry';
import type { IdempotencyService } from '../idempotency/idempotency.service';
import { trialError } from '../outbox/dead-letter-trial';
import type { DeadLetterTrialRow, DeadLetterTrialTarget, DeadLetterTrier } from '../outbox/dead-letter-trial.types';
import type { OutgoingOutboxMessage } from '../transports/outbox-transport';
import { describeRecord } from '../transports/record-description';
import { outgoingMessage } from './publish-pass';
import { missingDestination } from './row-delivery';

/**
 * The relay's trier of dead rows (`OutboxDeadLetters.dryRun()`): a row's destinations are found as `RowDelivery`
 * finds them (its own, or every destination of its message for `''`, `route.select()` included); each
 * `@OnOutboxEvent()` handler, and a broker consumer on its inbox row, runs in a transaction that is always rolled
 * back (`tryOutboxHandler()`, `tryConsumerHandler()`), each broker's
 * record is built by its transport from the same outgoing message and encoded by the client's serializer, then not
 * sent. Accepts every row (a later trier of another kind of row takes precedence for its own).
 */
export class RelayTrier implements DeadLetterTrier {
  constructor(
    private readonly destinations: OutboxDestinations,
    private readonly dataSource: DataSource,
    private readonly idempotency?: IdempotencyService,
    /** The broker consumers that retry from inbox rows (`consumer:<name>` rows). */
    private readonly consumers?: ConsumerRegistry,
  ) {}

  accepts(): boolean {
    return true;
  }

  async tryRow(row: DeadLetterTrialRow): Promise<DeadLetterTrialTarget[]> {
    // An expired message expires again at once when requeued (this process's clock stands in for the database's).
    const left = row.expiresAt === null ? undefined : row.expiresAt - Date.now();
    if (left !== undefined && left <= 0) throw new OutboxMessageExpiredError(expiredText(row.expiresAt!));
    const message = outgoingMessage({ ...row, ...(left === undefined ? {} : { expiresInMs: left }) });
    const destination = parseDestination(row.destination);
    const brokers = this.destinations.brokers;
    const handlers = this.destinations.handlersOf(row.pattern);
    const targets: Array<() => Promise<DeadLetterTrialTarget>> = [];
    if (destination.kind === 'all') {
      const broker = this.destinations.brokers.brokerOf(message);
      if (broker !== null) targets.push(() => this.tryBroker(message, broker));
      for (const handler of handlers) targets.push(() => this.tryHandler(message, handler));
    } else if (destination.kind === 'broker') {
      const broker = brokers.all.find((b) => tokenName(b.token) === destination.name);
      if (broker) targets.push(() => this.tryBroker(message, broker));
    } else if (destination.kind === 'handler') {
      const handler = handlers.find((h) => h.name === destination.name);
      if (handler) targets.push(() => this.tryHandler(message, handler));
    } else if (destination.kind === 'consumer') {
      const consumer = this.consumers?.get(destination.name);
      if (consumer) targets.push(() => this.tryConsumer(row, consumer));
    }
    if (targets.length === 0) throw new OutboxNoDestinationError(missingDestination(row, destination));
    const results: DeadLetterTrialTarget[] = [];
    for (const run of targets) results.push(await run());
    return results;
  }

  private async tryHandler(
    message: OutgoingOutboxMessage,
    handler: OutboxEventHandler,
  ): Promise<DeadLetterTrialTarget> {
    const destination = handlerDestination(handler.name);
    if (!this.idempotency) {
      const error = new OutboxConfigurationError('In-process handlers need the IdempotencyService of their outbox.');
      return { kind: 'handler', destination, ok: false, error: trialError(error) };
    }
    try {
      // As the first attempt after a requeue (which resets the attempts) would see it.
      const outcome = await tryOutboxHandler(this.dataSource, this.idempotency, handler, { ...message, attempts: 1 });
      return { kind: 'handler', destination, ok: true, outcome };
    } catch (error) {
      return { kind: 'handler', destination, ok: false, error: trialError(error) };
    }
  }

  private async tryConsumer(row: DeadLetterTrialRow, consumer: ConsumerHandler): Promise<DeadLetterTrialTarget> {
    const destination = row.destination;
    try {
      if (!this.idempotency)
        throw new OutboxConfigurationError('Consumers need the IdempotencyService of their outbox.');
      // As the first attempt after a requeue (which resets the attempts) would see it.
      const outcome = await tryConsumerHandler(this.dataSource, this.idempotency, consumer, { ...row, attempts: 1 });
      return { kind: 'consumer', destination, ok: true, outcome };
    } catch (error) {
      return { kind: 'consumer', destination, ok: false, error: trialError(error) };
    }
  }

  private async tryBroker(
    message: OutgoingOutboxMessage,
    broker: BrokerDestination | OutboxRouteError,
  ): Promise<DeadLetterTrialTarget> {
    if (broker instanceof OutboxRouteError) {
      return { kind: 'broker', destination: 'broker', ok: false, error: trialError(broker) };
    }
    const destination = brokerDestination(broker.token);
    try {
      const client = this.destinations.brokers.clientOf(broker);
      const transport = broker.client.transport!;
      await transport.ready?.();
      const record = transport.toRecord(message);
      const { headers, bytes } = await describeRecord(client, transport.name, message.pattern, record);
      const connected = broker.client.connected;
      const packet = { transport: transport.name, pattern: message.pattern, headers, bytes };
      return {
        kind: 'broker',
        destination,
        ok: true,
        packet: connected === undefined ? packet : { ...packet, connected },
      };
    } catch (error) {
      return { kind: 'broker', destination, ok: false, error: trialError(error) };
    }
  }
}

function expiredText(expiresAt: number): string {
  return (
    `expired at ${new Date(expiresAt).toISOString()} (emit()'s expiresIn / expiresAt): a requeue would make it dead ` +
    'again at once. Emit it again with a later expiry if it is still wanted.'
  );
}
