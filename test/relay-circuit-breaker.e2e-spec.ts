import { ClientsModule } from '@nestjs/microservices';
import { AggregationTemporality, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import request from 'supertest';
import { OUTBOX_METRICS, OutboxMessage, OutboxPublisher } from '../src';
import { OutboxConsoleModule } from '../src/console/outbox-console.module';
import type { OutboxRetryEvent } from '../src/events/publisher-events';
import type { OutboxRouteMessage } from '../src/destinations/outbox-route.types';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { CONSOLE_TOKEN, TokenGuard } from './helpers/console-app';
import { deleteQueue, rmqClientOptions, uniqueQueue } from './helpers/consumers';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith, SERVICES } from './helpers/services';
import { TcpProxy } from './helpers/tcp-proxy';

/** A reader that collects on demand (what a Prometheus scrape does). */
class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

const FAILURES = 3;
const COOL_DOWN = 3000;
const kinds: DatabaseKind[] = ['postgres', 'mariadb', 'sqlite'];

/**
 * One outbox, two RabbitMQ clients (queues X and Y): `route.select()` sends `x.*` to X, the rest to Y. X goes
 * through a TCP proxy owned by the test; cutting it opens X's breaker while Y keeps flowing.
 */
for (const kind of kinds) {
  describeWith([...servicesOf(kind), 'rabbitmq'], `A circuit breaker per broker on ${DATABASE_LABEL[kind]}`, () => {
    const queueX = uniqueQueue('outbox-breaker-x');
    const queueY = uniqueQueue('outbox-breaker-y');
    const reader = new TestReader();
    const meterProvider = new MeterProvider({ readers: [reader] });
    let proxy: TcpProxy;
    let atX: AmqpRecorder;
    let atY: AmqpRecorder;
    const retries: OutboxRetryEvent[] = [];
    const select = ({ pattern }: OutboxRouteMessage) => (pattern.startsWith('x.') ? 'X_RMQ' : 'Y_RMQ');
    const socketOptions = { reconnectTimeInSeconds: 0.2, heartbeatIntervalInSeconds: 1 };

    const fx = useOutboxApp(kind, async ({ defer }) => {
      proxy = await new TcpProxy(SERVICES.rabbitmq.host, SERVICES.rabbitmq.port).start();
      defer(() => proxy.stop());
      atX = await new AmqpRecorder(queueX).start();
      atY = await new AmqpRecorder(queueY).start();
      defer(() => atX.stop());
      defer(() => atY.stop());
      defer(() => deleteQueue(queueX));
      defer(() => deleteQueue(queueY));
      defer(() => meterProvider.shutdown());
      const viaProxy = `amqp://guest:guest@127.0.0.1:${proxy.port}`;
      return {
        logger: false,
        imports: [
          ClientsModule.register([
            { name: 'X_RMQ', ...rmqClientOptions(queueX, viaProxy, { socketOptions }) } as never,
            { name: 'Y_RMQ', ...rmqClientOptions(queueY, undefined, { socketOptions }) } as never,
          ]),
          OutboxConsoleModule.forRoot({ guard: TokenGuard }),
        ],
        outbox: {
          client: undefined,
          route: { clients: ['X_RMQ', 'Y_RMQ'], select },
          publisher: {
            pollingInterval: 50,
            publishTimeout: 500,
            // Fewer rows per claim than X has waiting: X's paused rows must not take every claim.
            batchSize: 4,
            circuitBreaker: { failures: FAILURES, coolDown: COOL_DOWN },
          },
          retry: { maxAttempts: 3, initialDelay: 20, factor: 2, maxDelay: 200, jitter: 0 },
          metrics: { meterProvider },
        },
      };
    });

    const breakerGauge = async () => {
      const { resourceMetrics } = await reader.collect();
      const metric = resourceMetrics.scopeMetrics
        .flatMap((s) => s.metrics)
        .find((m) => m.descriptor.name === OUTBOX_METRICS.breakerState);
      const byBroker: Record<string, unknown> = {};
      for (const p of metric?.dataPoints ?? []) byBroker[String(p.attributes['outbox.broker'])] = p.value;
      return byBroker;
    };
    const stateOf = (broker: string) => fx.app.get(OutboxPublisher).circuits.find((c) => c.broker === broker)?.state;
    const emitMany = (pattern: string, n: number, key?: (i: number) => string) =>
      fx.outbox.transaction(async () => {
        const ids: string[] = [];
        for (let i = 0; i < n; i++) ids.push(await fx.outbox.emit(pattern, { i }, key ? { key: key(i) } : {}));
        return ids;
      });

    it('opens after K failures of X, pauses X without spending attempts while Y flows, closes once X is back', async () => {
      const publisher = fx.app.get(OutboxPublisher);
      publisher.on('retry', (e) => retries.push(e));
      // Both clients connected and publishing.
      const [warmX] = await emitMany('x.placed', 1);
      const [warmY] = await emitMany('y.placed', 1);
      await waitFor(() => atX.distinct().has(warmX) && atY.distinct().has(warmY), 'a first message on each broker');
      expect(await breakerGauge()).toEqual({ X_RMQ: 0, Y_RMQ: 0 });

      proxy.cut();
      const xs = await emitMany('x.placed', 8, (i) => `kx${i % 2}`);
      await waitFor(() => stateOf('X_RMQ') === 'open', "X's breaker to open", 30_000);
      expect((await breakerGauge()).X_RMQ).toBe(2);
      expect(stateOf('Y_RMQ')).toBe('closed');
      // The console's summary has the line of X's breaker (open, or probing once the cool-down is over).
      const summary = await request(fx.app.getHttpServer())
        .get('/outbox-console/api/summary')
        .set({ 'x-console-token': CONSOLE_TOKEN })
        .expect(200);
      const circuits = summary.body.circuits as Array<{ broker: string; state: string; failures: number }>;
      expect(circuits.find((c) => c.broker === 'Y_RMQ')).toEqual({ broker: 'Y_RMQ', state: 'closed', failures: 0 });
      const x = circuits.find((c) => c.broker === 'X_RMQ');
      expect(['open', 'half-open']).toContain(x?.state);
      expect(x?.failures).toBeGreaterThanOrEqual(FAILURES);

      // While X is paused, Y's messages (other keys) flow.
      const ys = await emitMany('y.placed', 10, (i) => `ky${i % 3}`);
      await waitFor(() => ys.every((id) => atY.distinct().has(id)), "Y's messages while X is paused", 30_000);
      expect((await breakerGauge()).Y_RMQ).toBe(0);
      // X's messages were refused by the open breaker, their attempts given back: none counted, none dead.
      await waitFor(
        () => retries.some((e) => xs.includes(e.messageId) && e.errorType === 'OutboxCircuitOpenError'),
        'a publish of X refused by the open breaker',
        30_000,
      );
      const refused = retries.filter((e) => e.errorType === 'OutboxCircuitOpenError');
      expect(refused.every((e) => xs.includes(e.messageId) && e.transportUnreachable)).toBe(true);
      // The attempts counted so far: none, as a rule. A publish under way at the cut may time out before the client
      // reports the link down, and a timeout of a client that says it is connected counts (as any other does); the
      // refusals that follow must add nothing to it (checked on the rows at the end).
      const counted = (id: string) => Math.max(0, ...retries.filter((e) => e.messageId === id).map((e) => e.attempts));
      const repository = fx.dataSource.getRepository(OutboxMessage);
      const xRows = async () => (await repository.find()).filter((r) => xs.includes(r.messageId));
      expect((await xRows()).map((r) => r.status)).toEqual(xs.map(() => 'pending'));
      expect(xs.filter((id) => atX.distinct().has(id))).toEqual([]);

      // X comes back: the next probe after the cool-down succeeds, the breaker closes and X's messages follow.
      proxy.restore();
      await waitFor(() => xs.every((id) => atX.distinct().has(id)), "X's messages after it is back", 60_000);
      await waitFor(() => stateOf('X_RMQ') === 'closed', "X's breaker to close");
      expect(await breakerGauge()).toEqual({ X_RMQ: 0, Y_RMQ: 0 });
      await waitFor(async () => (await xRows()).every((r) => r.status === 'sent'), "X's rows marked sent");
      // The publish that went through is the only attempt added: the breaker's refusals spent none.
      expect((await xRows()).map((r) => r.attempts)).toEqual(xs.map((id) => counted(id) + 1));
      // Each key's order held through the pause.
      for (const key of ['kx0', 'kx1']) {
        const seen = atX.messages.filter((m) => xs.includes(m.messageId) && m.data?.i % 2 === Number(key.slice(2)));
        const order = [...new Set(seen.map((m) => m.data.i))];
        expect(order).toEqual([...order].sort((a, b) => a - b));
      }
    });
  });
}
