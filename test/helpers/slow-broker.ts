import type { INestApplication, LoggerService } from '@nestjs/common';
import { Transport } from '@nestjs/microservices';
import { AggregationTemporality, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import type { Histogram } from '@opentelemetry/sdk-metrics';
import { randomBytes } from 'node:crypto';
import { DataSource } from 'typeorm';
import { OUTBOX_METRICS, OutboxHealthIndicator, OutboxMessage, OutboxPublisher, OutboxService } from '../../src';
import { createOutboxTestingModule } from '../fixtures/outbox-app';
import type { TestDatabase } from './databases';
import { waitFor } from './ports';
import { SERVICES } from './services';
import { TcpProxy } from './tcp-proxy';

/** A broker the slow-broker scenario publishes to, and a consumer straight on it that counts every delivery. */
export type SlowBrokerTransport = 'rmq' | 'mqtt';

export interface SlowBrokerScenario {
  db: TestDatabase;
  transport: SlowBrokerTransport;
  /** Messages written once the link is slow. */
  events: number;
  /** `publisher.publishTimeout` (ms). */
  publishTimeout: number;
  /** Delay the proxy adds to every chunk, each way (ms): a confirm takes about twice this. */
  delayMs: number;
  /** `publisher.leaseDuration` (ms). @default 2 × publishTimeout + 1 s */
  leaseDuration?: number;
  /**
   * A second app on the same database and broker, started after the first (a replica whose publisher would take
   * rows over were their leases let expire). @default false
   */
  replica?: boolean;
  logger: LoggerService;
}

export interface SlowBrokerFigures {
  events: number;
  /** Messages the raw consumer never received. */
  lost: number;
  /** Deliveries beyond the first of a message id (republished). */
  duplicates: number;
  /** The most deliveries one message id got. */
  maxDeliveriesOfOne: number;
  sent: number;
  dead: number;
  /** True when `OutboxPublisher.brokerSlow` was seen true while the link was slow. */
  sawBrokerSlow: boolean;
  /** True when the health indicator reported `broker: 'slow'` (and `up`) while the link was slow. */
  healthSaidSlow: boolean;
  /** True when the `outbox.relay.broker.slow` gauge was collected as 1 while the link was slow. */
  gaugeSaidSlow: boolean;
  /** Publishes the confirm-latency histogram counted above `publishTimeout`. */
  lateConfirmsInHistogram: number;
  /** The most attempts any row counted (1 when no attempt was ever spent again). */
  maxAttempts: number;
  elapsedMs: number;
}

/**
 * Publishes `events` messages through a TCP proxy the scenario owns that delays every chunk by `delayMs` each way,
 * so that each broker confirm comes later than `publishTimeout`, and counts what a raw consumer straight on the
 * broker receives. `retry.maxAttempts` is 3: were a late confirm a failure, the rows would go dead.
 */
export async function runSlowBroker(s: SlowBrokerScenario): Promise<SlowBrokerFigures> {
  const reader = new CollectingReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const proxy = await new TcpProxy(
    s.transport === 'rmq' ? SERVICES.rabbitmq.host : SERVICES.mqtt.host,
    s.transport === 'rmq' ? SERVICES.rabbitmq.port : SERVICES.mqtt.port,
  ).start();
  const name = `outbox-slow-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
  const consumer = s.transport === 'rmq' ? await RawRmqConsumer.start(name) : await RawMqttConsumer.start(name);
  let app: INestApplication | undefined;
  let replica: INestApplication | undefined;
  try {
    const client =
      s.transport === 'rmq'
        ? {
            transport: Transport.RMQ,
            options: {
              urls: [`amqp://guest:guest@127.0.0.1:${proxy.port}`],
              queue: name,
              queueOptions: { durable: true },
            },
          }
        : {
            transport: Transport.MQTT,
            options: { url: `mqtt://127.0.0.1:${proxy.port}`, protocolVersion: 5 as const },
          };
    const start = async (metrics: boolean) => {
      const moduleRef = await createOutboxTestingModule({
        db: s.db,
        client: client as never,
        outbox: {
          publisher: {
            pollingInterval: 100,
            publishTimeout: s.publishTimeout,
            leaseDuration: s.leaseDuration ?? s.publishTimeout * 2 + 1_000,
          },
          retry: { initialDelay: 100, maxDelay: 1_000, maxAttempts: 3 },
          cleanup: { enabled: false },
          metrics: metrics ? { meterProvider } : { enabled: false },
        },
      });
      const started = moduleRef.createNestApplication({ logger: s.logger });
      await started.init();
      return started;
    };
    app = await start(true);
    if (s.replica) replica = await start(false);
    const outbox = app.get(OutboxService);
    const publisher = app.get(OutboxPublisher);
    const ds = app.get(DataSource);
    const repo = ds.getRepository(OutboxMessage);
    const pattern = s.transport === 'rmq' ? 'OrderPlaced' : name;

    // A first message over the fast link: the client connects before the link turns slow.
    const warmUp = await outbox.transaction(() => outbox.emit(pattern, { n: -1 }));
    await waitFor(async () => (await repo.countBy({ status: 'sent' })) === 1, 'the warm-up message sent', 30_000);
    proxy.delay(s.delayMs);

    const started = Date.now();
    const ids: string[] = [warmUp];
    for (let i = 0; i < s.events; i += 200) {
      const chunk = Array.from({ length: Math.min(200, s.events - i) }, (_, j) => ({ pattern, payload: { n: i + j } }));
      ids.push(...(await outbox.transaction(() => outbox.emitMany(chunk))));
    }
    let sawBrokerSlow = false;
    let gaugeSaidSlow = false;
    let healthSaidSlow = false;
    const health = app.get(OutboxHealthIndicator);
    const total = ids.length;
    await waitFor(
      async () => {
        sawBrokerSlow ||= publisher.brokerSlow;
        const { outbox: h } = await health.isHealthy('outbox');
        healthSaidSlow ||= h.broker === 'slow' && h.status === 'up';
        gaugeSaidSlow ||= (await reader.points(OUTBOX_METRICS.brokerSlow)).some((p) => p.value === 1);
        const settled = await repo.count({ where: [{ status: 'sent' }, { status: 'dead' }] });
        return settled === total;
      },
      `all ${total} messages settled over the slow link`,
      90_000,
    ).catch(() => undefined);
    const elapsedMs = Date.now() - started;
    // Let any late duplicate reach the consumer before counting.
    await new Promise((r) => setTimeout(r, s.delayMs * 2 + 500));

    const durations = await reader.points(OUTBOX_METRICS.operationDuration);
    const lateConfirmsInHistogram = durations.reduce(
      (sum, p) => sum + lateCount(p.value as Histogram, s.publishTimeout),
      0,
    );
    const counts = consumer.counts();
    const rows = await repo.find({ select: { status: true, attempts: true } });
    return {
      events: total,
      lost: ids.filter((id) => !counts.has(id)).length,
      duplicates: [...counts.values()].reduce((sum, n) => sum + n - 1, 0),
      maxDeliveriesOfOne: Math.max(0, ...counts.values()),
      sent: rows.filter((r) => r.status === 'sent').length,
      dead: rows.filter((r) => r.status === 'dead').length,
      sawBrokerSlow,
      gaugeSaidSlow,
      healthSaidSlow,
      lateConfirmsInHistogram,
      maxAttempts: Math.max(0, ...rows.map((r) => r.attempts)),
      elapsedMs,
    };
  } finally {
    await replica?.close();
    await app?.close();
    await proxy.stop();
    await consumer.stop();
    await meterProvider.shutdown();
  }
}

/** Publishes a duration histogram counted in its buckets above `publishTimeout` (ms). */
function lateCount(histogram: Histogram, publishTimeout: number): number {
  const { boundaries, counts } = histogram.buckets;
  // counts[i] holds the values up to boundaries[i]; the last one those above every boundary.
  return counts.reduce((sum, n, i) => (i > 0 && boundaries[i - 1] >= publishTimeout / 1000 ? sum + n : sum), 0);
}

/** Collects the library's metrics on demand (cumulative). */
class CollectingReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}

  async points(name: string) {
    const { resourceMetrics } = await this.collect();
    const metrics = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics);
    return metrics.find((m) => m.descriptor.name === name)?.dataPoints ?? [];
  }
}

/** Deliveries per message id, counted by a consumer straight on the broker (never through the proxy). */
interface RawConsumer {
  counts(): Map<string, number>;
  stop(): Promise<void>;
}

class RawRmqConsumer implements RawConsumer {
  private readonly seen = new Map<string, number>();
  private constructor(
    private readonly connection: import('amqplib').ChannelModel,
    private readonly queue: string,
  ) {}

  static async start(queue: string): Promise<RawRmqConsumer> {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const amqp = require('amqplib') as typeof import('amqplib');
    const { host, port } = SERVICES.rabbitmq;
    const connection = await amqp.connect(`amqp://guest:guest@${host}:${port}`);
    const consumer = new RawRmqConsumer(connection, queue);
    const channel = await connection.createChannel();
    await channel.assertQueue(queue, { durable: true });
    await channel.prefetch(1_000);
    await channel.consume(queue, (msg) => {
      if (!msg) return;
      const id = String(msg.properties.messageId);
      consumer.seen.set(id, (consumer.seen.get(id) ?? 0) + 1);
      channel.ack(msg);
    });
    return consumer;
  }

  counts(): Map<string, number> {
    return this.seen;
  }

  async stop(): Promise<void> {
    const channel = await this.connection.createChannel().catch(() => undefined);
    await channel?.deleteQueue(this.queue).catch(() => undefined);
    await this.connection.close().catch(() => undefined);
  }
}

class RawMqttConsumer implements RawConsumer {
  private readonly seen = new Map<string, number>();
  private constructor(private readonly client: import('mqtt').MqttClient) {}

  static async start(topic: string): Promise<RawMqttConsumer> {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const mqtt = require('mqtt') as typeof import('mqtt');
    const { host, port } = SERVICES.mqtt;
    const client = await mqtt.connectAsync(`mqtt://${host}:${port}`, { protocolVersion: 5 });
    const consumer = new RawMqttConsumer(client);
    client.on('message', (_topic, _payload, packet) => {
      const raw = packet.properties?.userProperties?.['x-message-id'];
      const id = String(Array.isArray(raw) ? raw[0] : raw);
      consumer.seen.set(id, (consumer.seen.get(id) ?? 0) + 1);
    });
    await client.subscribeAsync(topic, { qos: 1 });
    return consumer;
  }

  counts(): Map<string, number> {
    return this.seen;
  }

  async stop(): Promise<void> {
    await this.client.endAsync().catch(() => undefined);
  }
}
