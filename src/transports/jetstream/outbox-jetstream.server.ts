import { Logger } from '@nestjs/common';
import { CustomTransportStrategy, NatsContext, Server } from '@nestjs/microservices';
import { isObservable, lastValueFrom, Observable } from 'rxjs';
import { describeError } from '../../util/describe-error';

/** Options of `OutboxJetStreamServer`. */
export interface OutboxJetStreamServerOptions {
  /** Connection options of the `nats` package (`servers`, credentials, reconnect settings …). */
  connection?: Record<string, unknown>;
  /** The stream to consume. */
  stream: string;
  /**
   * The durable consumer to read through. Created with explicit acks when missing (`filterSubjects`, `ackWait`);
   * an existing one must have `ack_policy: explicit`.
   */
  consumer: string;
  /**
   * Subjects a consumer this server creates reads (default: all of the stream's). Several subjects need
   * nats-server 2.10 or later; one works on older servers too.
   */
  filterSubjects?: string[];
  /** Messages handled at the same time (default 16). */
  concurrency?: number;
  /** Milliseconds the server may hold a message before JetStream redelivers it, for a consumer it creates (30000). */
  ackWait?: number;
  /** Delay of the first redelivery after a handler failed, in ms, doubled each time (default 1000). */
  nakDelay?: number;
  /** Longest delay of a redelivery after a failure, in ms (default 60000). */
  maxNakDelay?: number;
  /** Deliveries after which a message whose handler keeps failing is terminated (`term`), default 10. */
  maxDeliveries?: number;
}

/** The parts of a JetStream message used here (`JsMsg` of the `nats` package). */
export interface OutboxJetStreamMessage {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly headers?: unknown;
  readonly info: { deliveryCount: number; stream: string; streamSequence: number };
  readonly redelivered: boolean;
  ack(): void;
  nak(millis?: number): void;
  working(): void;
  term(reason?: string): void;
}

/**
 * The context of a message handled by `OutboxJetStreamServer`: a `NatsContext` (subject, headers — so
 * `getOutboxMessageId()` and `@Idempotent()` read the `x-message-id` header), with the JetStream message and
 * `term()` for a message that can never succeed.
 */
export class OutboxJetStreamContext extends NatsContext {
  private settled = false;

  constructor(private readonly message: OutboxJetStreamMessage) {
    super([message.subject, message.headers]);
  }

  /** The JetStream message (its delivery info: `info.deliveryCount`, `info.streamSequence`). */
  getMessage(): OutboxJetStreamMessage {
    return this.message;
  }

  /**
   * Ends the message for good (JetStream `term`): it is not redelivered, whatever the handler does next. For a
   * message that can never succeed (it fails validation, refers to what does not exist).
   */
  term(): void {
    this.settle('term');
  }

  /** True once the message was acknowledged, delayed or terminated. */
  get isSettled(): boolean {
    return this.settled;
  }

  /** @internal Acknowledges, delays (`nak` after `delay` ms) or terminates the message, once. */
  settle(how: 'ack' | 'nak' | 'term', delay?: number): void {
    if (this.settled) return;
    this.settled = true;
    if (how === 'ack') this.message.ack();
    else if (how === 'nak') this.message.nak(delay);
    // Without a reason: a server before 2.10 ignores `+TERM <reason>` (and redelivers).
    else this.message.term();
  }
}

type ConsumerMessages = AsyncIterable<OutboxJetStreamMessage> & { close(): Promise<void | Error> };
interface NatsPackage {
  connect(options: Record<string, unknown>): Promise<NatsConnection>;
  AckPolicy: { Explicit: string };
  nanos(millis: number): number;
}
interface NatsConnection {
  jetstream(): {
    consumers: { get(stream: string, name: string): Promise<{ consume(o: object): Promise<ConsumerMessages> }> };
  };
  jetstreamManager(): Promise<{
    consumers: {
      info(stream: string, name: string): Promise<{ config: { ack_policy: string; ack_wait?: number } }>;
      add(stream: string, config: Record<string, unknown>): Promise<{ config: { ack_wait?: number } }>;
    };
  }>;
  drain(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A Nest microservice transport that consumes a durable JetStream consumer: `app.connectMicroservice({ strategy:
 * new OutboxJetStreamServer({ connection: { servers }, stream: 'ORDERS', consumer: 'billing' }) })`.
 *
 * Each message goes to the `@EventPattern()` handler of its subject, with an `OutboxJetStreamContext`. The message is
 * acknowledged once the handler's result completed — under `@Idempotent()` that is after the handler's transaction
 * committed with the message's record (a redelivery is skipped and acknowledged). A handler that fails is
 * redelivered after `nakDelay` (doubled per delivery, up to `maxNakDelay`); after `maxDeliveries` it is
 * terminated, and so is a message without a handler or whose data is not JSON: none blocks the messages behind it.
 * While a handler runs, the server tells JetStream it is still working, so a slow handler is not redelivered;
 * a process that dies mid-handler is (after the consumer's `ack_wait`).
 */
export class OutboxJetStreamServer extends Server implements CustomTransportStrategy {
  private connection?: NatsConnection;
  private messages?: ConsumerMessages;
  private readonly running = new Set<Promise<void>>();
  private loop?: Promise<void>;
  private ackWaitMs = 30_000;
  protected readonly logger = new Logger(OutboxJetStreamServer.name);

  constructor(private readonly options: OutboxJetStreamServerOptions) {
    super();
  }

  async listen(callback: (error?: unknown) => void): Promise<void> {
    try {
      await this.start();
      callback();
    } catch (error) {
      callback(error);
    }
  }

  async close(): Promise<void> {
    await this.messages?.close();
    await this.loop;
    await Promise.allSettled([...this.running]);
    await this.connection?.drain().catch(() => undefined);
    this.connection = undefined;
  }

  on(): never {
    throw new Error('OutboxJetStreamServer does not emit events; watch the NATS connection through unwrap().');
  }

  unwrap<T>(): T {
    if (!this.connection) throw new Error('OutboxJetStreamServer is not listening yet.');
    return this.connection as T;
  }

  private async start(): Promise<void> {
    const { stream, consumer } = this.options;
    const nats = (await import('nats')) as unknown as NatsPackage & { default?: NatsPackage };
    const pkg = typeof nats.connect === 'function' ? nats : nats.default!;
    this.connection = await pkg.connect({ ...this.options.connection });
    const jsm = await this.connection.jetstreamManager();
    const info = await jsm.consumers.info(stream, consumer).catch(async (error: unknown) => {
      if ((error as { api_error?: { err_code?: number } })?.api_error?.err_code !== 10014) throw error;
      return jsm.consumers.add(stream, {
        durable_name: consumer,
        ack_policy: pkg.AckPolicy.Explicit,
        ack_wait: pkg.nanos(this.options.ackWait ?? 30_000),
        ...filterOf(this.options.filterSubjects),
      });
    });
    const policy = (info.config as { ack_policy?: string }).ack_policy;
    if (policy !== undefined && policy !== pkg.AckPolicy.Explicit) {
      throw new Error(
        `OutboxJetStreamServer: consumer '${consumer}' of stream '${stream}' has ack_policy '${policy}'; messages ` +
          'would count as handled before the handler committed. Set its ack_policy to explicit.',
      );
    }
    if (info.config.ack_wait) this.ackWaitMs = info.config.ack_wait / 1e6;
    const source = await this.connection.jetstream().consumers.get(stream, consumer);
    const concurrency = this.options.concurrency ?? 16;
    this.messages = await source.consume({ max_messages: concurrency });
    this.loop = this.consume(this.messages, concurrency);
  }

  private async consume(messages: ConsumerMessages, concurrency: number): Promise<void> {
    for await (const message of messages) {
      if (this.running.size >= concurrency) await Promise.race(this.running);
      const run = this.handle(message).finally(() => this.running.delete(run));
      this.running.add(run);
    }
  }

  /** Runs one message's handler and settles the message with JetStream. */
  private async handle(message: OutboxJetStreamMessage): Promise<void> {
    const context = new OutboxJetStreamContext(message);
    const { subject } = message;
    const handler = this.getHandlerByPattern(subject);
    if (!handler) {
      this.logger.error(`No @EventPattern('${subject}') handler: message ${describeMessage(message)} terminated.`);
      return context.settle('term');
    }
    let data: unknown;
    try {
      data = packetData(message.data);
    } catch (error) {
      this.logger.error(`Message ${describeMessage(message)} is not JSON (${describeError(error)}): terminated.`);
      return context.settle('term');
    }
    const keepAlive = setInterval(() => message.working(), Math.max(1000, this.ackWaitMs / 3));
    try {
      const result: unknown = await handler(data, context);
      if (isObservable(result)) await lastValueFrom(result as Observable<unknown>, { defaultValue: undefined });
      context.settle('ack');
    } catch (error) {
      if (context.isSettled) return;
      const deliveries = message.info.deliveryCount;
      const max = this.options.maxDeliveries ?? 10;
      if (deliveries >= max) {
        this.logger.error(
          `Message ${describeMessage(message)} failed ${deliveries} times (maxDeliveries ${max}): terminated. ` +
            `Last error: ${describeError(error)}`,
        );
        context.settle('term');
      } else {
        const first = this.options.nakDelay ?? 1000;
        const delay = Math.min(this.options.maxNakDelay ?? 60_000, first * 2 ** (deliveries - 1));
        context.settle('nak', delay);
      }
    } finally {
      clearInterval(keepAlive);
    }
  }
}

/** The handler's data: Nest's packet (`{ pattern, data }`, as `ClientNats` and the outbox send it) or the JSON as is. */
function packetData(raw: Uint8Array): unknown {
  const value: unknown = JSON.parse(Buffer.from(raw).toString('utf8'));
  if (value && typeof value === 'object' && 'pattern' in value && 'data' in value)
    return (value as { data: unknown }).data;
  return value;
}

/** One subject as `filter_subject` (what a server before 2.10 knows), several as `filter_subjects` (2.10+). */
function filterOf(subjects: string[] | undefined): Record<string, unknown> {
  if (!subjects || subjects.length === 0) return {};
  return subjects.length === 1 ? { filter_subject: subjects[0] } : { filter_subjects: subjects };
}

function describeMessage(message: OutboxJetStreamMessage): string {
  return `${message.info.stream}#${message.info.streamSequence} ('${message.subject}')`;
}
