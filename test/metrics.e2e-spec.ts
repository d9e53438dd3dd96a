import { Body, Controller, Injectable, Post } from '@nestjs/common';
import { EventPattern, MicroserviceOptions, Transport } from '@nestjs/microservices';
import { RmqRecordSerializer } from '@nestjs/microservices/serializers/rmq-record.serializer';
import {
  AggregationTemporality,
  DataPoint,
  Histogram,
  MeterProvider,
  MetricReader,
  ResourceMetrics,
} from '@opentelemetry/sdk-metrics';
import { createServer, Server } from 'node:net';
import request from 'supertest';
import {
  Idempotent,
  OnOutboxEvent,
  OUTBOX_METRICS,
  OutboxDeadLetters,
  OutboxEnvelopeDeserializer,
  OutboxPublisher,
  OutboxService,
} from '../src';
import { deliverEveryMessageTwice } from '../src/testing';
import { OutboxDatabase } from '../src/dialects/outbox-database';
import { deleteQueue, rmqClientOptions, uniqueQueue } from './helpers/consumers';
import { DATABASE_LABEL, DatabaseKind } from './helpers/databases';
import { useOutboxApp, useTestDatabase } from './helpers/e2e-fixture';
import { freePort, waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/** A reader that collects on demand (what a Prometheus scrape does). */
class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

/** The client's serializer, made to throw for messages marked `poison` while `poisoned` holds. */
class PoisonSerializer {
  poisoned = true;
  constructor(private readonly inner: { serialize(value: any): any } = { serialize: (value) => value }) {}
  serialize(packet: any): any {
    if (this.poisoned && JSON.stringify(packet).includes('"poison":true')) throw new Error('cannot encode poison');
    return this.inner.serialize(packet);
  }
}

type Point = DataPoint<unknown>;

/** An idempotent route that writes nothing to the outbox (the relay's counts stay those of the first test). */
@Controller('payments')
class PaymentsController {
  runs = 0;
  @Post()
  @Idempotent()
  pay(@Body() body: { amount: number }) {
    this.runs++;
    return { paid: body.amount, run: this.runs };
  }
}

/** The data points of one instrument, by its name. */
async function points(reader: TestReader, name: string): Promise<Point[]> {
  const { resourceMetrics, errors } = await reader.collect();
  expect(errors).toEqual([]);
  return metricsOf(resourceMetrics).find((m) => m.descriptor.name === name)?.dataPoints ?? [];
}

function metricsOf(resource: ResourceMetrics) {
  return resource.scopeMetrics.filter((s) => s.scope.name === 'nestjs-outbox').flatMap((s) => s.metrics);
}

/** Each point as `[attributes, value]` (a histogram's value is its count), sorted for a stable comparison. */
function summary(list: Point[]): Array<[Record<string, unknown>, number]> {
  return list
    .map((p): [Record<string, unknown>, number] => [
      p.attributes,
      typeof p.value === 'number' ? p.value : (p.value as Histogram).count,
    ])
    .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
}

const setups: Array<{ kind: DatabaseKind; broker: string; system: string; services: ('postgres' | 'rabbitmq')[] }> = [
  { kind: 'sqlite', broker: 'TCP', system: 'tcp', services: [] },
  { kind: 'postgres', broker: 'RabbitMQ', system: 'rabbitmq', services: ['postgres', 'rabbitmq'] },
];

for (const setup of setups) {
  describeWith(setup.services, `OpenTelemetry metrics on ${DATABASE_LABEL[setup.kind]} → ${setup.broker}`, () => {
    const reader = new TestReader();
    const meterProvider = new MeterProvider({ readers: [reader] });
    const serializer = new PoisonSerializer(setup.kind === 'postgres' ? new RmqRecordSerializer() : undefined);
    let sink: Server | undefined;

    const fx = useOutboxApp(setup.kind, async ({ defer }) => {
      let client;
      if (setup.system === 'rabbitmq') {
        const queue = uniqueQueue('outbox-metrics');
        defer(() => deleteQueue(queue));
        client = rmqClientOptions(queue, undefined, { serializer });
      } else {
        // A TCP peer that accepts and discards what it is sent.
        const port = await freePort();
        sink = createServer((socket) => socket.resume());
        await new Promise<void>((resolve) => sink!.listen(port, '127.0.0.1', resolve));
        defer(() => new Promise((resolve) => sink!.close(resolve)));
        client = { transport: Transport.TCP, options: { host: '127.0.0.1', port, serializer } };
      }
      defer(() => meterProvider.shutdown());
      return {
        client: client as any,
        logger: false,
        controllers: [PaymentsController],
        outbox: {
          publisher: { enabled: false },
          retry: { maxAttempts: 2, initialDelay: 0, maxDelay: 0, jitter: 0 },
          metrics: { meterProvider },
        },
      };
    });

    it('counts 3 published, 1 failing until dead, its requeue and republish; backlog gauges from stats()', async () => {
      const { outbox, app } = fx;
      const publisher = app.get(OutboxPublisher);
      const M = OUTBOX_METRICS;
      await outbox.transaction(async () => {
        for (let n = 1; n <= 3; n++) await outbox.emit('OrderPlaced', { n });
        await outbox.emit('Poison', { poison: true });
      });
      const ds = { 'outbox.data_source': 'default' };
      expect(summary(await points(reader, M.pending))).toEqual([[ds, 4]]);
      expect(summary(await points(reader, M.due))).toEqual([[ds, 4]]);
      expect(summary(await points(reader, M.inFlight))).toEqual([[ds, 0]]);
      expect(summary(await points(reader, M.dead))).toEqual([[ds, 0]]);
      const [age] = await points(reader, M.oldestPendingAge);
      expect(age.value).toBeGreaterThanOrEqual(0);
      // One query per collection for the five gauges.
      const stats = jest.spyOn(app.get(OutboxDatabase).dialect, 'stats');
      await reader.collect();
      expect(stats).toHaveBeenCalledTimes(1);
      stats.mockRestore();

      // Pass 1: three sent, the poison fails (attempt 1, retried); pass 2: it fails again and is dead (maxAttempts 2).
      await publisher.runPass();
      await publisher.runPass();
      expect(summary(await points(reader, M.dead))).toEqual([[ds, 1]]);
      expect(summary(await points(reader, M.pending))).toEqual([[ds, 0]]);
      expect(summary(await points(reader, M.oldestPendingAge))).toEqual([[ds, 0]]);

      expect(await app.get(OutboxDeadLetters).requeue()).toBe(1);
      expect(summary(await points(reader, M.dead))).toEqual([[ds, 0]]);
      expect(summary(await points(reader, M.due))).toEqual([[ds, 1]]);
      serializer.poisoned = false;
      expect(await publisher.flush()).toBe(1);

      const send = {
        ...ds,
        'messaging.operation.name': 'send',
        'messaging.operation.type': 'send',
        'messaging.system': setup.system,
      };
      const order = { ...send, 'messaging.destination.name': 'OrderPlaced' };
      const poison = { ...send, 'messaging.destination.name': 'Poison' };
      const failedPoison = { ...poison, 'error.type': 'Error' };
      const expectedAttempts = [
        [order, 3],
        [poison, 1],
        [failedPoison, 2],
      ];
      expect(summary(await points(reader, M.sentMessages))).toEqual(summary(expectedAttempts.map(asPoint)));
      expect(summary(await points(reader, M.operationDuration))).toEqual(summary(expectedAttempts.map(asPoint)));
      expect(summary(await points(reader, M.publishDelay))).toEqual(
        summary([
          asPoint([{ ...ds, 'messaging.destination.name': 'OrderPlaced' }, 3]),
          asPoint([{ ...ds, 'messaging.destination.name': 'Poison' }, 1]),
        ]),
      );
      const poisonError = { ...ds, 'messaging.destination.name': 'Poison', 'error.type': 'Error' };
      expect(summary(await points(reader, M.retried))).toEqual([
        [{ ...poisonError, 'outbox.transport_unreachable': false }, 1],
      ]);
      expect(summary(await points(reader, M.deadLettered))).toEqual([[poisonError, 1]]);
      expect(summary(await points(reader, M.requeued))).toEqual([
        [{ ...ds, 'messaging.destination.name': 'Poison' }, 1],
      ]);
      expect(await points(reader, M.leaseLost)).toEqual([]);
      // Every confirm was prompt: the broker is not slow.
      expect(summary(await points(reader, M.brokerSlow))).toEqual([[ds, 0]]);
      for (const name of [M.pending, M.due, M.inFlight, M.dead]) {
        expect([name, summary(await points(reader, name))]).toEqual([name, [[ds, 0]]]);
      }
      // Durations and delays are in seconds and not negative; the delay includes the time before the claim.
      const delays = await points(reader, M.publishDelay);
      const [delay] = delays.filter((p) => p.attributes['messaging.destination.name'] === 'OrderPlaced');
      expect((delay.value as Histogram).min).toBeGreaterThanOrEqual(0);
    });

    it('counts idempotency outcomes per route: executed, replayed, 422 mismatch, 400 invalid', async () => {
      const { app } = fx;
      const M = OUTBOX_METRICS;
      const server = app.getHttpServer();
      const post = (key: string, amount: number) =>
        request(server).post('/payments').set('Idempotency-Key', key).send({ amount });
      expect((await post('pay-1', 10)).status).toBe(201);
      const replay = await post('pay-1', 10);
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect((await post('pay-1', 99)).status).toBe(422);
      expect((await post('', 10)).status).toBe(400);
      expect(app.get(PaymentsController).runs).toBe(1);
      const route = {
        'outbox.idempotency.consumer': 'PaymentsController.pay',
        'outbox.idempotency.kind': 'http',
        'outbox.data_source': 'default',
      };
      expect(summary(await points(reader, M.idempotency))).toEqual(
        summary([
          asPoint([{ ...route, 'outbox.idempotency.outcome': 'executed' }, 1]),
          asPoint([{ ...route, 'outbox.idempotency.outcome': 'replayed' }, 1]),
          asPoint([{ ...route, 'outbox.idempotency.outcome': 'mismatch' }, 1]),
          asPoint([{ ...route, 'outbox.idempotency.outcome': 'invalid' }, 1]),
        ]),
      );
    });
  });
}

/** A message consumer guarded by `@Idempotent()`. */
@Controller()
class PaidConsumer {
  runs = 0;
  @EventPattern('Paid')
  @Idempotent()
  onPaid() {
    this.runs++;
  }
}

describe(`OpenTelemetry metrics of a consumer's @Idempotent() on ${DATABASE_LABEL.sqlite} → TCP`, () => {
  const fx = useTestDatabase('sqlite');

  it('counts a message delivered twice as executed once and duplicate_skipped once', async () => {
    const reader = new TestReader();
    const meterProvider = new MeterProvider({ readers: [reader] });
    fx.defer(() => meterProvider.shutdown());
    const port = await freePort();
    const app = await fx.start({
      client: { transport: Transport.TCP, options: { host: '127.0.0.1', port } } as never,
      outbox: { publisher: { enabled: false }, metrics: { meterProvider } },
      controllers: [PaidConsumer],
      adjust: deliverEveryMessageTwice,
      logger: false,
      beforeInit: async (nest) => {
        nest.connectMicroservice<MicroserviceOptions>({
          transport: Transport.TCP,
          options: { host: '127.0.0.1', port, deserializer: new OutboxEnvelopeDeserializer() },
        });
        await nest.startAllMicroservices();
      },
    });
    const outbox = app.get(OutboxService);
    await outbox.transaction(() => outbox.emit('Paid', { amount: 5 }));
    expect(await app.get(OutboxPublisher).flush()).toBe(1);
    const consumer = {
      'outbox.idempotency.consumer': 'PaidConsumer.onPaid',
      'outbox.idempotency.kind': 'rpc',
      'outbox.data_source': 'default',
    };
    const outcomes = async () => summary(await points(reader, OUTBOX_METRICS.idempotency));
    await waitFor(async () => (await outcomes()).reduce((n, [, v]) => n + v, 0) === 2, 'both deliveries to be handled');
    expect(await outcomes()).toEqual(
      summary([
        asPoint([{ ...consumer, 'outbox.idempotency.outcome': 'executed' }, 1]),
        asPoint([{ ...consumer, 'outbox.idempotency.outcome': 'duplicate_skipped' }, 1]),
      ]),
    );
    expect(app.get(PaidConsumer).runs).toBe(1);
  });
});

/** An in-process handler that fails its first run. */
@Injectable()
class AuditHandler {
  runs = 0;
  @OnOutboxEvent('Audited')
  audit() {
    if (++this.runs === 1) throw new Error('audit store not ready');
  }
}

describe(`OpenTelemetry metrics of in-process handlers on ${DATABASE_LABEL.sqlite}, beside a TCP broker`, () => {
  const fx = useTestDatabase('sqlite');

  it('counts handler runs as outbox.handler.runs, not as broker sends', async () => {
    const reader = new TestReader();
    const meterProvider = new MeterProvider({ readers: [reader] });
    fx.defer(() => meterProvider.shutdown());
    const port = await freePort();
    const sink = createServer((socket) => socket.resume());
    await new Promise<void>((resolve) => sink.listen(port, '127.0.0.1', resolve));
    fx.defer(() => new Promise((resolve) => sink.close(resolve)));
    const app = await fx.start({
      client: { transport: Transport.TCP, options: { host: '127.0.0.1', port } } as never,
      outbox: {
        publisher: { enabled: false },
        retry: { maxAttempts: 3, initialDelay: 0, maxDelay: 0, jitter: 0 },
        metrics: { meterProvider },
      },
      providers: [AuditHandler],
      logger: false,
    });
    const outbox = app.get(OutboxService);
    const publisher = app.get(OutboxPublisher);
    await outbox.transaction(async () => {
      await outbox.emit('Audited', { n: 1 });
      await outbox.emit('OrderPlaced', { n: 1 });
    });
    await publisher.runPass(); // OrderPlaced sent; the handler fails (retried)
    await publisher.runPass(); // the handler applies it
    expect(app.get(AuditHandler).runs).toBe(2);
    const M = OUTBOX_METRICS;
    const ds = { 'outbox.data_source': 'default' };
    const handler = { ...ds, 'messaging.destination.name': 'Audited', 'outbox.handler.name': 'AuditHandler.audit' };
    expect(summary(await points(reader, M.handlerRuns))).toEqual(
      summary([asPoint([handler, 1]), asPoint([{ ...handler, 'error.type': 'OutboxHandlerFailedError' }, 1])]),
    );
    // The sends are the broker's rows (each message also goes to the broker), all confirmed: no failed send, and
    // nothing of the handler's run (its failure, its name) counted as one.
    const send = {
      ...ds,
      'messaging.operation.name': 'send',
      'messaging.operation.type': 'send',
      'messaging.system': 'tcp',
    };
    const sends = summary([
      asPoint([{ ...send, 'messaging.destination.name': 'Audited' }, 1]),
      asPoint([{ ...send, 'messaging.destination.name': 'OrderPlaced' }, 1]),
    ]);
    expect(summary(await points(reader, M.sentMessages))).toEqual(sends);
    expect(summary(await points(reader, M.operationDuration))).toEqual(sends);
    // The retry is still counted, as a failure of the message's pattern.
    expect(summary(await points(reader, M.retried))).toEqual([
      [
        {
          ...ds,
          'messaging.destination.name': 'Audited',
          'error.type': 'OutboxHandlerFailedError',
          'outbox.transport_unreachable': false,
        },
        1,
      ],
    ]);
  });
});

function asPoint([attributes, value]: unknown[]): Point {
  return { attributes, value } as Point;
}
