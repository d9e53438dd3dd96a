import type { INestApplication, LoggerService } from '@nestjs/common';
import { AggregationTemporality, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { DataSource, In } from 'typeorm';
import { OUTBOX_METRICS, OutboxMessage, OutboxPublisher, OutboxService } from '../src';
import { startOutboxApp } from './helpers/outbox-test-app';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { rmqClientOptions, uniqueQueue } from './helpers/consumers';
import { createTestDatabase, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith, SERVICES } from './helpers/services';
import { TcpProxy } from './helpers/tcp-proxy';

const SLOT = 'nestjs_outbox_outbox_messages';

/** Collects log lines (every level) of an app. */
class Lines implements LoggerService {
  readonly lines: string[] = [];
  log = (m: unknown) => void this.lines.push(String(m));
  warn = (m: unknown) => void this.lines.push(String(m));
  error = (m: unknown) => void this.lines.push(String(m));
  debug = () => undefined;
  verbose = () => undefined;
  has(pattern: RegExp): boolean {
    return this.lines.some((l) => pattern.test(l));
  }
}

/** A reader that collects on demand. */
class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

/** An app whose outbox streams from the WAL (`mode`), publishing to `queue` (through `url`). */
async function walApp(
  db: TestDatabase,
  queue: string,
  options: { mode?: 'wal' | 'wal-or-poll'; url?: string; meterProvider?: MeterProvider } = {},
) {
  const logs = new Lines();
  const app = await startOutboxApp(db, {
    logger: logs,
    client: rmqClientOptions(queue, options.url, {
      socketOptions: { reconnectTimeInSeconds: 0.2, heartbeatIntervalInSeconds: 1 },
    }),
    outbox: {
      publisher: { mode: options.mode ?? 'wal', pollingInterval: 100, publishTimeout: 1000, walHandoff: 60_000 },
      retry: { initialDelay: 50, maxDelay: 200, maxAttempts: 50 },
      ...(options.meterProvider ? { metrics: { meterProvider: options.meterProvider } } : {}),
    },
  });
  return { app, logs };
}

/** Emits `count` messages in transactions of 50, on `keys` keys (`n` numbers them per key). */
async function emit(app: INestApplication, count: number, keys = 10, tag = 'm'): Promise<string[]> {
  const outbox = app.get(OutboxService);
  const ids: string[] = [];
  for (let i = 0; i < count; i += 50) {
    const chunk = Array.from({ length: Math.min(50, count - i) }, (_, j) => i + j);
    ids.push(
      ...(await outbox.transaction(() =>
        outbox.emitMany(
          chunk.map((n) => ({ pattern: 'Walled', payload: { tag, n }, options: { key: `k${n % keys}` } })),
        ),
      )),
    );
  }
  return ids;
}

/**
 * Per key, the first arrivals of its messages are in emit order: `tags` in the order they were emitted, `n` within
 * one tag (its key is `n % keys`).
 */
function orderHolds(recorder: AmqpRecorder, tags = ['m'], keys = 10): boolean {
  const seen = new Set<string>();
  const last = new Map<number, number>();
  for (const m of recorder.messages) {
    if (seen.has(m.messageId)) continue;
    seen.add(m.messageId);
    const key = m.data.n % keys;
    const rank = tags.indexOf(m.data.tag) * 1_000_000 + m.data.n;
    if ((last.get(key) ?? -1) > rank) return false;
    last.set(key, rank);
  }
  return true;
}

async function dropSlot(db: TestDatabase): Promise<void> {
  const admin = new DataSource({ ...(db.options as any), entities: [] });
  await admin.initialize();
  try {
    await admin.query(
      'SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active',
      [SLOT],
    );
    for (let i = 0; i < 50; i++) {
      const [row] = await admin.query('SELECT active FROM pg_replication_slots WHERE slot_name = $1', [SLOT]);
      if (!row) return;
      if (!row.active) {
        await admin.query('SELECT pg_drop_replication_slot($1)', [SLOT]);
        return;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await admin.destroy();
  }
}

const sentRows = (app: INestApplication) =>
  app
    .get(DataSource)
    .getRepository(OutboxMessage)
    .find({ where: { status: 'sent' } });

describeWith(['postgres-logical', 'rabbitmq'], 'The WAL relay (publisher.mode wal) on PostgreSQL', () => {
  let db: TestDatabase;
  const apps: INestApplication[] = [];
  const recorders: AmqpRecorder[] = [];
  const proxies: TcpProxy[] = [];

  beforeEach(async () => {
    db = await createTestDatabase('postgres-logical');
  });

  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close().catch(() => undefined);
    for (const r of recorders.splice(0)) await r.stop();
    for (const p of proxies.splice(0)) await p.stop();
    await dropSlot(db);
    await db.drop();
  });

  const recorder = async (queue: string) => {
    const r = await new AmqpRecorder(queue).start();
    recorders.push(r);
    return r;
  };

  it('streams 2,000 messages in commit order, never claiming them, per-key order held', async () => {
    const queue = uniqueQueue('outbox-wal');
    const rec = await recorder(queue);
    const { app, logs } = await walApp(db, queue);
    apps.push(app);
    await waitFor(() => app.get(OutboxPublisher).walState === 'streaming', 'the WAL reader to stream');
    expect(logs.has(/Made the publication and replication slot nestjs_outbox_outbox_messages/)).toBe(true);
    const ids = await emit(app, 2000);
    await waitFor(() => rec.distinct().size === ids.length, 'every message at the broker', 30_000);
    expect(orderHolds(rec)).toBe(true);
    await waitFor(async () => (await sentRows(app)).length === ids.length, 'every row marked sent');
    // Never claimed: a polled row has attempts 1 once sent; a streamed one keeps 0.
    expect((await sentRows(app)).every((r) => r.attempts === 0)).toBe(true);
    // The slot was told every commit is done: nothing left to read.
    const lag = () => app.get(OutboxPublisher).walLag();
    expect(await lag()).toEqual({ lagBytes: expect.any(Number), retainedBytes: expect.any(Number) });
    await waitFor(async () => ((await lag())?.lagBytes ?? Infinity) < 100_000, 'the slot caught up');
  });

  it('many small concurrent transactions: each row is streamed, none left behind (a commit arrives before it is visible)', async () => {
    const queue = uniqueQueue('outbox-wal-small');
    const rec = await recorder(queue);
    const { app } = await walApp(db, queue);
    apps.push(app);
    await waitFor(() => app.get(OutboxPublisher).walState === 'streaming', 'the WAL reader to stream');
    const outbox = app.get(OutboxService);
    const ids: string[] = [];
    // 20 writers, one message per transaction: the stream sends each commit a moment before other sessions see it.
    await Promise.all(
      Array.from({ length: 20 }, async (_, w) => {
        for (let i = 0; i < 50; i++) {
          ids.push(await outbox.transaction(() => outbox.emit('Walled', { tag: 'small', n: w * 50 + i })));
        }
      }),
    );
    // walHandoff is 60 s here: a row the stream skipped would not reach the broker within this wait.
    await waitFor(() => ids.every((id) => rec.distinct().has(id)), 'every row at the broker', 20_000);
    await waitFor(async () => (await sentRows(app)).length >= ids.length, 'every row marked sent');
  });

  it('reports the slot lag and retained WAL as gauges', async () => {
    const queue = uniqueQueue('outbox-wal-metrics');
    const rec = await recorder(queue);
    const reader = new TestReader();
    const { app } = await walApp(db, queue, { meterProvider: new MeterProvider({ readers: [reader] }) });
    apps.push(app);
    await waitFor(() => app.get(OutboxPublisher).walState === 'streaming', 'the WAL reader to stream');
    const ids = await emit(app, 100);
    await waitFor(() => rec.distinct().size === ids.length, 'every message at the broker');
    const { resourceMetrics, errors } = await reader.collect();
    expect(errors).toEqual([]);
    const metrics = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
    for (const name of [OUTBOX_METRICS.walSlotLag, OUTBOX_METRICS.walRetained]) {
      const points = metrics.find((m) => m.descriptor.name === name)?.dataPoints ?? [];
      expect(points).toHaveLength(1);
      expect(points[0].value).toEqual(expect.any(Number));
      expect(points[0].value as number).toBeGreaterThanOrEqual(0);
    }
  });

  it('two replicas: one streams; when it closes the other takes over, nothing lost', async () => {
    const queue = uniqueQueue('outbox-wal-replicas');
    const rec = await recorder(queue);
    const a = await walApp(db, queue);
    const b = await walApp(db, queue);
    apps.push(a.app, b.app);
    const pa = a.app.get(OutboxPublisher);
    const pb = b.app.get(OutboxPublisher);
    await waitFor(() => pa.walState === 'streaming' || pb.walState === 'streaming', 'one reader');
    expect([pa.walState, pb.walState].sort()).toEqual(['standby', 'streaming']);
    const [first, second] = pa.walState === 'streaming' ? [a.app, b.app] : [b.app, a.app];
    const before = await emit(first, 500);
    await waitFor(() => before.every((id) => rec.distinct().has(id)), 'the first 500');
    await first.close();
    await waitFor(() => second.get(OutboxPublisher).walState === 'streaming', 'the standby to take over', 20_000);
    const after = await emit(second, 500, 10, 'after');
    await waitFor(() => after.every((id) => rec.distinct().has(id)), 'the next 500 through the new reader');
    expect(orderHolds(rec, ['m', 'after'])).toBe(true);
    expect((await sentRows(second)).every((r) => r.attempts === 0)).toBe(true);
  });

  it('a slot left unread while polling sent its rows replays none of them', async () => {
    const queue = uniqueQueue('outbox-wal-replay');
    const rec = await recorder(queue);
    const first = await walApp(db, queue); // makes the slot
    await waitFor(() => first.app.get(OutboxPublisher).walState === 'streaming', 'the WAL reader to stream');
    await first.app.close();
    // Polling only, the slot unread: it keeps these inserts.
    const polling = await startOutboxApp(db, {
      logger: false,
      client: rmqClientOptions(queue),
      outbox: { publisher: { pollingInterval: 50 } },
    });
    apps.push(polling);
    const ids = await emit(polling, 300);
    await waitFor(async () => (await sentRows(polling)).length === ids.length, 'every row sent by polling');
    await polling.close();
    const { app, logs } = await walApp(db, queue);
    apps.push(app);
    await waitFor(() => app.get(OutboxPublisher).walState === 'streaming', 'the WAL reader to stream');
    await waitFor(async () => ((await app.get(OutboxPublisher).walLag())?.lagBytes ?? Infinity) < 100_000, 'caught up');
    const after = await emit(app, 10, 10, 'after');
    // Timed out once in CI under load: should it again, the message says where the new rows were.
    await waitFor(
      () => after.every((id) => rec.distinct().has(id)),
      'the new rows',
      20_000,
      async () => {
        const rows = await app
          .get(DataSource)
          .getRepository(OutboxMessage)
          .find({ where: { messageId: In(after) } });
        const states = rows.map((r) => `${r.status}/${r.attempts}/${r.claimedBy ? 'claimed' : '-'}`);
        const publisher = app.get(OutboxPublisher);
        return JSON.stringify({
          received: after.filter((id) => rec.distinct().has(id)).length,
          rows: states,
          walState: publisher.walState,
          lag: await publisher.walLag(),
          logs: logs.lines.slice(-10),
        });
      },
    );
    expect(rec.messages).toHaveLength(ids.length + after.length); // no duplicate of the polled ones
  });

  it('a dropped slot: says so and falls back to polling, which delivers the rest', async () => {
    const queue = uniqueQueue('outbox-wal-dropped');
    const rec = await recorder(queue);
    const { app, logs } = await walApp(db, queue);
    apps.push(app);
    const publisher = app.get(OutboxPublisher);
    await waitFor(() => publisher.walState === 'streaming', 'the WAL reader to stream');
    await dropSlot(db);
    await waitFor(() => publisher.walState === 'off', 'the fallback', 20_000);
    expect(logs.has(/replication slot nestjs_outbox_outbox_messages is gone.*polling publishes every row/)).toBe(true);
    const ids = await emit(app, 200);
    await waitFor(() => ids.every((id) => rec.distinct().has(id)), 'every message, by polling');
    expect((await sentRows(app)).every((r) => r.attempts === 1)).toBe(true);
  });

  it('a broker outage (TCP proxy cut): nothing lost, per-key order held', async () => {
    const queue = uniqueQueue('outbox-wal-outage');
    const rec = await recorder(queue);
    const proxy = await new TcpProxy(SERVICES.rabbitmq.host, SERVICES.rabbitmq.port).start();
    proxies.push(proxy);
    const { app } = await walApp(db, queue, { url: `amqp://guest:guest@127.0.0.1:${proxy.port}` });
    apps.push(app);
    await waitFor(() => app.get(OutboxPublisher).walState === 'streaming', 'the WAL reader to stream');
    const first = await emit(app, 300, 10, 'before');
    await waitFor(() => first.every((id) => rec.distinct().has(id)), 'the messages before the cut');
    proxy.cut();
    const during = await emit(app, 300, 10, 'during');
    await new Promise((r) => setTimeout(r, 1500));
    proxy.restore();
    const after = await emit(app, 300, 10, 'after');
    const all = [...first, ...during, ...after];
    await waitFor(
      () => all.every((id) => rec.distinct().has(id)),
      'all 900',
      60_000,
      async () => {
        const missing = all.filter((id) => !rec.distinct().has(id));
        const rows = await app
          .get(DataSource)
          .getRepository(OutboxMessage)
          .find({ where: { messageId: In(missing.slice(0, 50)) } });
        const states = new Map<string, number>();
        for (const r of rows) {
          const state = `${r.status}/${r.attempts}/${r.claimedBy ? 'claimed' : '-'}`;
          states.set(state, (states.get(state) ?? 0) + 1);
        }
        const publisher = app.get(OutboxPublisher);
        return JSON.stringify({
          missing: missing.length,
          firstMissingRows: Object.fromEntries(states),
          walState: publisher.walState,
          lag: await publisher.walLag(),
        });
      },
    );
    // Per-key order held across the cut: a key's failed row holds its later rows back, in the stream and in polling.
    expect(orderHolds(rec, ['before', 'during', 'after'])).toBe(true);
    // Every row is sent: the ones that failed during the cut went to the retry states and polling sent them.
    await waitFor(async () => (await sentRows(app)).length === all.length, 'every row marked sent');
  });
});

describeWith(['postgres', 'rabbitmq'], 'The WAL relay where wal_level is not logical', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
  });

  afterAll(async () => {
    await db?.drop();
  });

  it("mode 'wal-or-poll' says why and polls", async () => {
    const queue = uniqueQueue('outbox-wal-fallback');
    const rec = await new AmqpRecorder(queue).start();
    const { app, logs } = await walApp(db, queue, { mode: 'wal-or-poll' });
    try {
      expect(logs.has(/wal-or-poll.*polling.*wal_level = logical.*wal_level = replica/)).toBe(true);
      expect(app.get(OutboxPublisher).walState !== 'off').toBe(false);
      const ids = await emit(app, 100);
      await waitFor(() => ids.every((id) => rec.distinct().has(id)), 'every message, by polling');
    } finally {
      await app.close();
      await rec.stop();
    }
  });

  it("mode 'wal' fails the start-up with OutboxWalUnavailableError saying the fix", async () => {
    const queue = uniqueQueue('outbox-wal-strict');
    await expect(walApp(db, queue, { mode: 'wal' })).rejects.toMatchObject({
      name: 'OutboxWalUnavailableError',
      code: 'OUTBOX_WAL_UNAVAILABLE',
      message: expect.stringContaining('Set `wal_level = logical`'),
    });
  });
});
