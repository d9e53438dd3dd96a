import { AggregationTemporality, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { setTimeout as sleep } from 'node:timers/promises';
import { OutboxDeadLetters, OutboxMessage, OutboxPublisher } from '../src';
import type { OutboxExpiredEvent } from '../src/events/publisher-events';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { rmqClientOptions, uniqueQueue } from './helpers/consumers';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith, SERVICES } from './helpers/services';
import { TcpProxy } from './helpers/tcp-proxy';

const kinds: DatabaseKind[] = ['postgres', 'mariadb', 'sqlite'];

/** A reader that collects on demand (what a Prometheus scrape does). */
class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

/** The points of the counter `outbox.relay.expired` as `[attributes, value]`. */
async function expiredCounts(reader: TestReader): Promise<Array<[Record<string, unknown>, unknown]>> {
  const { resourceMetrics } = await reader.collect();
  const metric = resourceMetrics.scopeMetrics
    .filter((s) => s.scope.name === 'nestjs-outbox')
    .flatMap((s) => s.metrics)
    .find((m) => m.descriptor.name === 'outbox.relay.expired');
  return (metric?.dataPoints ?? []).map((p) => [p.attributes, p.value]);
}

/** Message expiry (`emit(…, { expiresIn })`) against a RabbitMQ cut off through a TCP proxy. */
for (const kind of kinds) {
  describeWith([...servicesOf(kind), 'rabbitmq'], `Message expiry on ${DATABASE_LABEL[kind]}`, () => {
    let proxy: TcpProxy;
    let recorder: AmqpRecorder;
    const queue = uniqueQueue('outbox-expiry');
    const expired: OutboxExpiredEvent[] = [];
    const fx = useOutboxApp(kind, async ({ defer }) => {
      proxy = await new TcpProxy(SERVICES.rabbitmq.host, SERVICES.rabbitmq.port).start();
      defer(() => proxy.stop());
      recorder = await new AmqpRecorder(queue).start();
      defer(() => recorder.stop());
      return {
        logger: false,
        client: rmqClientOptions(queue, `amqp://guest:guest@127.0.0.1:${proxy.port}`, {
          socketOptions: { reconnectTimeInSeconds: 0.2, heartbeatIntervalInSeconds: 1 },
        }),
        outbox: {
          publisher: { pollingInterval: 50, publishTimeout: 500 },
          retry: { initialDelay: 20, factor: 2, maxDelay: 100 },
        },
        beforeInit: (app) => void app.get(OutboxPublisher).on('expired', (e) => expired.push(e)),
      };
    });

    const rowOf = (messageId: string) => fx.dataSource.getRepository(OutboxMessage).findOneByOrFail({ messageId });

    it('publishes none of the messages that expired during a broker cut; each is dead (expired); their key flows on', async () => {
      const outbox = fx.outbox;
      const first = await outbox.transaction(() => outbox.emit('OrderPlaced', { n: 0 }));
      await waitFor(() => recorder.distinct().has(first), 'a first message through the proxy');
      await waitFor(async () => (await rowOf(first)).status === 'sent', 'the first row marked sent');

      proxy.cut();
      const [soon, alsoSoon, unkeyed, after] = await outbox.transaction(async () => [
        await outbox.emit('OrderPlaced', { key: 'k', n: 1 }, { key: 'k', expiresIn: 1000 }),
        await outbox.emit('OrderPlaced', { key: 'k', n: 2 }, { key: 'k', expiresAt: new Date(Date.now() + 1000) }),
        await outbox.emit('OrderPlaced', { n: 3 }, { expiresIn: 1000 }),
        await outbox.emit('OrderPlaced', { key: 'k', n: 4 }, { key: 'k' }),
      ]);
      const expiring = [soon, alsoSoon, unkeyed];
      await sleep(3000); // the broker stays unreachable well past the expiry
      proxy.restore();

      await waitFor(() => recorder.distinct().has(after), 'the later message of the key, after the restore', 30_000);
      const later = await outbox.transaction(() => outbox.emit('OrderPlaced', { key: 'k', n: 5 }, { key: 'k' }));
      await waitFor(() => recorder.distinct().has(later), 'a message of the key emitted after the restore');
      await waitFor(
        async () => (await Promise.all(expiring.map(rowOf))).every((r) => r.status === 'dead'),
        'the expired messages dead',
      );

      expect(expiring.filter((id) => recorder.distinct().has(id))).toEqual([]);
      const dead = await fx.app.get(OutboxDeadLetters).list();
      expect(dead.map((r) => r.messageId).sort()).toEqual([...expiring].sort());
      for (const row of dead) {
        expect(row.lastError).toMatch(/^OutboxMessageExpiredError: expired at \S+ before it could be published/);
        expect(row.expiresAt).toEqual(expect.any(Date));
      }
      expect(expired.map((e) => [e.messageId, e.outcome]).sort()).toEqual(expiring.map((id) => [id, 'dead']).sort());
      // The key's order held for what was published.
      const seen = recorder.messages.filter((m) => m.data?.key === 'k').map((m) => m.data.n);
      expect([...new Set(seen)]).toEqual([4, 5]);
      expect((await rowOf(after)).status).toBe('sent');
    });

    it('sends the time left as the AMQP expiration; a message without expiry has none', async () => {
      const outbox = fx.outbox;
      const [timed, plain] = await outbox.transaction(async () => [
        await outbox.emit('OrderPlaced', { n: 6 }, { expiresIn: 60_000 }),
        await outbox.emit('OrderPlaced', { n: 7 }),
      ]);
      await waitFor(() => recorder.distinct().has(timed) && recorder.distinct().has(plain), 'both messages');
      const expiration = Number(recorder.messages.find((m) => m.messageId === timed)!.expiration);
      expect(Number.isInteger(expiration)).toBe(true);
      expect(expiration).toBeGreaterThan(0);
      expect(expiration).toBeLessThanOrEqual(60_000);
      expect(recorder.messages.find((m) => m.messageId === plain)!.expiration).toBeUndefined();
    });
  });
}

/** `publisher.onExpired: 'drop'`: an expired message is deleted instead of kept as a dead letter. */
for (const kind of kinds) {
  describeWith([...servicesOf(kind), 'rabbitmq'], `Expired messages dropped on ${DATABASE_LABEL[kind]}`, () => {
    let recorder: AmqpRecorder;
    const queue = uniqueQueue('outbox-expiry-drop');
    const expired: OutboxExpiredEvent[] = [];
    const reader = new TestReader();
    const fx = useOutboxApp(kind, async ({ defer }) => {
      recorder = await new AmqpRecorder(queue).start();
      defer(() => recorder.stop());
      return {
        logger: false,
        client: rmqClientOptions(queue),
        outbox: {
          publisher: { pollingInterval: 50, onExpired: 'drop' },
          metrics: { meterProvider: new MeterProvider({ readers: [reader] }) },
        },
        beforeInit: (app) => void app.get(OutboxPublisher).on('expired', (e) => expired.push(e)),
      };
    });

    it('deletes a message that expired before its turn, unpublished and not dead; the next of its key goes', async () => {
      const outbox = fx.outbox;
      const [gone, next] = await outbox.transaction(async () => [
        await outbox.emit('OrderPlaced', { n: 1 }, { key: 'd', expiresAt: new Date(Date.now() - 1000) }),
        await outbox.emit('OrderPlaced', { n: 2 }, { key: 'd' }),
      ]);
      await waitFor(() => recorder.distinct().has(next), 'the next message of the key');
      await waitFor(() => expired.length > 0, 'the expired event');
      expect(expired.map((e) => [e.messageId, e.outcome])).toEqual([[gone, 'drop']]);
      expect(recorder.distinct().has(gone)).toBe(false);
      expect(await fx.dataSource.getRepository(OutboxMessage).countBy({ messageId: gone })).toBe(0);
      expect(await fx.app.get(OutboxDeadLetters).count()).toBe(0);
      expect(await expiredCounts(reader)).toEqual([
        [
          {
            'outbox.data_source': 'default',
            'messaging.destination.name': 'OrderPlaced',
            'outbox.expired.outcome': 'drop',
          },
          1,
        ],
      ]);
    });
  });
}
