import { Logger } from '@nestjs/common';
import { ClientNats, NatsOptions, NatsRecord, ReadPacket } from '@nestjs/microservices';
import { OutboxPublishTimeoutError } from '../../errors';
import { MESSAGE_ID_HEADER } from '../../outbox.constants';
import { describeError } from '../../util/describe-error';
import { isTransportUnreachable } from '../transport-unreachable';
import { checkDuplicateWindow, OutboxRelayTiming } from './duplicate-window';

/** Options of `OutboxJetStreamClient`: Nest's NATS client options and the JetStream stream to publish into. */
export type OutboxJetStreamClientOptions = NonNullable<NatsOptions['options']> & {
  /**
   * Name of the JetStream stream that captures the subjects (the event patterns) this client publishes to. Every
   * publish expects this stream (a subject captured by another stream is refused), and the outbox checks at start-up
   * that it exists and that its `duplicate_window` covers the time within which a message may be published again.
   */
  stream: string;
  /** Milliseconds the JetStream client waits for one PubAck (default 30000); a later one is an unknown outcome. */
  pubAckTimeout?: number;
  /**
   * The `nats` connection option: `false` makes the client capture a stack trace for every publish, so that a failed
   * one shows where it was made. Such a trace only ever points into the outbox's relay, and capturing it (three
   * `Error`s per publish) cost about 30 µs of CPU per message here — 40 % of a JetStream publish.
   * @default true (unlike the `nats` package, whose default is `false`)
   */
  noAsyncTraces?: boolean;
};

/** The parts of the `nats` package's objects used here (the package is the app's; Nest loads it). */
interface PubAck {
  stream: string;
  seq: number;
  duplicate: boolean;
}
interface JetStreamPublisher {
  publish(
    subject: string,
    data: Uint8Array | undefined,
    options: { msgID?: string; headers?: unknown; timeout: number; expect: { streamName: string } },
  ): Promise<PubAck>;
}
interface JetStreamConnection {
  jetstream(): JetStreamPublisher;
  jetstreamManager(): Promise<{ streams: { info(name: string): Promise<{ config: { duplicate_window: number } }> } }>;
}
type NatsHeaders = { get(name: string): string; has(name: string): boolean };

const DEFAULT_PUBACK_TIMEOUT = 30_000;

/**
 * A NATS client that publishes to JetStream: `ClientsModule.register([{ name: 'BROKER', customClass:
 * OutboxJetStreamClient, options: { servers, stream: 'ORDERS' } }])` and `OutboxModule.forRoot({ client: 'BROKER' })`
 * (or one of `route.clients`). Its `emit()` completes when the stream's PubAck arrives, so the outbox marks a message
 * sent only once JetStream stored it. Each message carries its outbox message id as `Nats-Msg-Id`: a message the
 * relay publishes again (a crash between PubAck and marking it sent, an unknown outcome) is dropped by the stream's
 * duplicate detection, and its PubAck (marked `duplicate`) counts as success. Headers, serializer, connection options
 * and reconnect handling are those of Nest's `ClientNats`; the message id also travels as the `x-message-id` header.
 *
 * Before its first publish for an outbox, the client checks that the stream exists and that its `duplicate_window`
 * is at least `publisher.leaseDuration` + `retry.maxDelay` (an `OutboxConfigurationError` naming the setting if not).
 */
export class OutboxJetStreamClient extends ClientNats {
  private readonly jetStreamLogger = new Logger(OutboxJetStreamClient.name);
  private jetStream?: JetStreamPublisher;
  private timing?: OutboxRelayTiming;
  private checked?: Promise<void>;
  private duplicateAcks = 0;

  constructor(private readonly jetStreamOptions: OutboxJetStreamClientOptions) {
    super(natsOptionsOf(jetStreamOptions));
    if (typeof jetStreamOptions?.stream !== 'string' || jetStreamOptions.stream.length === 0) {
      throw new TypeError('OutboxJetStreamClient needs the option `stream`: the name of the JetStream stream.');
    }
  }

  /** The stream this client publishes into. */
  get stream(): string {
    return this.jetStreamOptions.stream;
  }

  /** PubAcks so far that said `duplicate`: messages the stream already had (published again after an unknown outcome). */
  get duplicates(): number {
    return this.duplicateAcks;
  }

  /**
   * @internal Called by the outbox at start-up and before each batch: checks the stream against the relay's timing (once, until
   * it passed). A broker that cannot be reached is not an error here: the check runs again before the first publish.
   */
  async checkOutboxRelay(timing: { leaseDuration: number; maxRetryDelay: number }): Promise<void> {
    this.timing = timing;
    try {
      await this.streamChecked();
    } catch (error) {
      if (!isTransportUnreachable(error)) throw error;
      this.jetStreamLogger.warn(
        `JetStream stream '${this.stream}' not checked yet (${describeError(error)}); checked before the first publish.`,
      );
    }
  }

  async close(): Promise<void> {
    this.jetStream = undefined;
    this.checked = undefined;
    await super.close();
  }

  protected async dispatchEvent(packet: ReadPacket): Promise<any> {
    const connection = (await this.connect()) as unknown as JetStreamConnection;
    if (this.timing) await this.streamChecked();
    const subject = this.normalizePattern(packet.pattern);
    const record = this.serializer.serialize(packet) as NatsRecord & { data?: Uint8Array };
    const headers = this.mergeHeaders(record.headers) as NatsHeaders | undefined;
    const msgID = headers?.has(MESSAGE_ID_HEADER) ? headers.get(MESSAGE_ID_HEADER) : undefined;
    const timeout = this.jetStreamOptions.pubAckTimeout ?? DEFAULT_PUBACK_TIMEOUT;
    this.jetStream ??= connection.jetstream();
    let ack: PubAck;
    try {
      ack = await this.jetStream.publish(subject, record.data, {
        ...(msgID ? { msgID } : {}),
        headers,
        timeout,
        expect: { streamName: this.stream },
      });
    } catch (error) {
      throw publishError(error, subject, this.stream, timeout);
    }
    if (ack.duplicate) this.duplicateAcks++;
    return ack;
  }

  /** The stream check, run once per connection until it passes; a failed one runs again next time. */
  private streamChecked(): Promise<void> {
    if (!this.checked) {
      const timing = this.timing!;
      this.checked = (async () => {
        const connection = (await this.connect()) as unknown as JetStreamConnection;
        const manager = await connection.jetstreamManager();
        await checkDuplicateWindow(manager, this.stream, timing);
      })();
      this.checked.catch(() => (this.checked = undefined));
    }
    return this.checked;
  }
}

/** Nest's NATS client options: the JetStream ones taken out (they are not connection options). */
function natsOptionsOf(options: OutboxJetStreamClientOptions): NonNullable<NatsOptions['options']> {
  const natsOptions: Record<string, unknown> = { ...options, noAsyncTraces: options?.noAsyncTraces ?? true };
  delete natsOptions.stream;
  delete natsOptions.pubAckTimeout;
  return natsOptions as NonNullable<NatsOptions['options']>;
}

/** What a failed JetStream publish means: a PubAck that did not come is an unknown outcome, not a failure. */
function publishError(error: unknown, subject: string, stream: string, timeout: number): unknown {
  const code = (error as { code?: unknown })?.code;
  if (code === 'TIMEOUT') {
    return new OutboxPublishTimeoutError(
      `No PubAck from JetStream stream '${stream}' within ${timeout} ms for subject '${subject}' (outcome unknown; ` +
        'published again with the same Nats-Msg-Id, which the stream drops if it has the message)',
    );
  }
  if (code === '503') {
    const wrapped = new Error(
      `No JetStream stream captures subject '${subject}' (NATS answered 503, no responders): add the subject to ` +
        `stream '${stream}' (its \`subjects\`), or check that JetStream is enabled on the server`,
    );
    (wrapped as { cause?: unknown }).cause = error;
    return wrapped;
  }
  return error;
}
