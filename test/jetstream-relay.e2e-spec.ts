import type { INestApplication, LoggerService } from '@nestjs/common';
import { inspect } from 'node:util';
import { DataSource } from 'typeorm';
import {
  OutboxConfigurationError,
  OutboxDeadLetters,
  OutboxJetStreamClient,
  OutboxMessage,
  OutboxPublisher,
  OutboxService,
} from '../src';
import { OutboxAttempt } from '../src/schema/outbox-attempt.entity';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { createTestDatabase, TestDatabase } from './helpers/databases';
import { NATS_URL, TestStream } from './helpers/jetstream';
import { freePort, waitFor } from './helpers/ports';
import { describeWith, SERVICES } from './helpers/services';
import { TcpProxy } from './helpers/tcp-proxy';

jest.setTimeout(120_000);

const LEASE = 2_000;
const MAX_DELAY = 1_000;

/** An app whose outbox publishes through `OutboxJetStreamClient` into `stream`. */
async function jetStreamApp(db: TestDatabase, stream: TestStream, servers = [NATS_URL], outbox = {}) {
  const moduleRef = await createOutboxTestingModule({
    db,
    client: {
      customClass: OutboxJetStreamClient,
      options: { servers, stream: stream.name, reconnectTimeWait: 100, maxReconnectAttempts: -1 },
    } as any,
    outbox: {
      publisher: { pollingInterval: 50, leaseDuration: LEASE, publishTimeout: 500 },
      retry: { maxAttempts: 3, initialDelay: 20, factor: 2, maxDelay: MAX_DELAY },
      ...outbox,
    },
  });
  const app = moduleRef.createNestApplication();
  app.useLogger(false);
  try {
    await app.init();
  } catch (error) {
    await app.close().catch(() => undefined);
    throw error;
  }
  return app;
}

async function emitAll(app: INestApplication, subject: string, count: number, chunk = 1000): Promise<string[]> {
  const outbox = app.get(OutboxService);
  const ids: string[] = [];
  for (let start = 0; start < count; start += chunk) {
    await outbox.transaction(async () => {
      const events = Array.from({ length: Math.min(chunk, count - start) }, (_, i) => ({
        pattern: subject,
        payload: { n: start + i },
      }));
      ids.push(...(await outbox.emitMany(events)));
    });
  }
  return ids;
}

const rowsOf = (app: INestApplication) => app.get(DataSource).getRepository(OutboxMessage);

describeWith(['postgres', 'nats'], 'Relay to NATS JetStream (OutboxJetStreamClient) on PostgreSQL', () => {
  let db: TestDatabase;
  const apps: INestApplication[] = [];
  const streams: TestStream[] = [];

  // A database and a stream of its own for each test.
  beforeEach(async () => {
    db = await createTestDatabase('postgres');
  });

  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
    for (const stream of streams.splice(0)) await stream.delete();
    await db?.drop();
  });

  async function newStream(duplicateWindowMs?: number): Promise<TestStream> {
    const stream = await new TestStream(duplicateWindowMs).create();
    streams.push(stream);
    return stream;
  }

  it('publishes 10k messages into the stream, each once, with its outbox message id as Nats-Msg-Id', async () => {
    const stream = await newStream();
    const app = await jetStreamApp(db, stream);
    apps.push(app);
    const ids = await emitAll(app, stream.subject('placed'), 10_000);
    await waitFor(async () => (await rowsOf(app).countBy({ status: 'sent' })) === ids.length, '10k rows sent', 90_000);
    const stored = await stream.ids();
    expect(stored.length).toBe(ids.length);
    expect(new Set(stored)).toEqual(new Set(ids));
    expect(await app.get(OutboxDeadLetters).count()).toBe(0);
  });

  it('a message published again after a crash between PubAck and marking sent is stored once (PubAck duplicate)', async () => {
    const stream = await newStream();
    const app = await jetStreamApp(db, stream);
    apps.push(app);
    const ids = await emitAll(app, stream.subject('crashed'), 500);
    await waitFor(async () => (await stream.count()) === ids.length, 'the stream to hold every message');
    await waitFor(async () => (await rowsOf(app).countBy({ status: 'sent' })) >= ids.length, 'rows sent');
    // What a crash after the PubAck and before the "sent" write leaves: rows pending, claimed by a publisher that is
    // gone, its lease over. The running publisher takes them over and publishes them again.
    await app
      .get(DataSource)
      .query(
        `UPDATE outbox_messages SET status = 'pending', sent_at = NULL, claimed_by = gen_random_uuid()::text, ` +
          `claimed_until = 0 WHERE message_id = ANY($1)`,
        [ids],
      );
    const client = app.get<OutboxJetStreamClient>('BROKER');
    const before = client.duplicates;
    app.get(OutboxPublisher).wake();
    await waitFor(async () => (await rowsOf(app).countBy({ status: 'sent' })) >= ids.length, 'rows sent again');
    expect(client.duplicates - before).toBe(ids.length);
    const stored = await stream.ids();
    expect(stored.length).toBe(ids.length);
    expect(new Set(stored)).toEqual(new Set(ids));
  });

  it('NATS cut for 20 s during a burst: nothing dead, nothing lost, each message stored once', async () => {
    const stream = await newStream();
    const proxy = await new TcpProxy(SERVICES.nats.host, SERVICES.nats.port).start();
    try {
      const app = await jetStreamApp(db, stream, [`nats://127.0.0.1:${proxy.port}`]);
      apps.push(app);
      const subject = stream.subject('burst');
      const ids = await emitAll(app, subject, 1000, 100);
      await waitFor(async () => (await stream.count()) > 0, 'a first message stored');
      proxy.cut();
      ids.push(...(await emitAll(app, subject, 2000, 100)));
      await new Promise((resolve) => setTimeout(resolve, 20_000));
      const during = await rowsOf(app).countBy({ status: 'pending' });
      expect(during).toBeGreaterThan(0);
      proxy.restore();
      await waitFor(
        async () => (await rowsOf(app).countBy({ status: 'sent' })) === ids.length,
        'every row sent after the link came back',
        60_000,
      );
      expect(await rowsOf(app).countBy({ status: 'dead' })).toBe(0);
      const stored = await stream.ids();
      expect(stored.length).toBe(ids.length);
      expect(new Set(stored)).toEqual(new Set(ids));
    } finally {
      proxy.cut();
      await proxy.stop();
    }
  });

  it('refuses to start when the stream keeps message ids shorter than lease + retry.maxDelay, naming duplicate_window', async () => {
    const stream = await newStream(LEASE + MAX_DELAY - 1_000);
    const error = await jetStreamApp(db, stream).then(
      (app) => (apps.push(app), undefined),
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(OutboxConfigurationError);
    expect(String((error as Error).message)).toMatch(/duplicate_window 2000 ms.*at least 3000 ms/);
  });

  it('starts while NATS is unreachable, keeps messages pending, and keeps its credentials out of logs and last_error', async () => {
    const secret = `pw-${Date.now()}`;
    const port = await freePort();
    const lines: string[] = [];
    const record = (...args: unknown[]) =>
      lines.push(args.map((a) => (typeof a === 'string' ? a : inspect(a, { depth: 5 }))).join(' '));
    const logger: LoggerService = { log: record, error: record, warn: record, debug: record, verbose: record };
    const moduleRef = await createOutboxTestingModule({
      db,
      client: {
        customClass: OutboxJetStreamClient,
        options: { servers: [`nats://outbox:${secret}@127.0.0.1:${port}`], stream: 'OUTBOX_UNREACHABLE' },
      } as any,
      outbox: { publisher: { pollingInterval: 50 }, retry: { initialDelay: 20, maxDelay: 200 } },
    });
    const app = moduleRef.createNestApplication();
    app.useLogger(logger);
    await app.init();
    apps.push(app);
    const outbox = app.get(OutboxService);
    const id = await outbox.transaction(() => outbox.emit('orders.placed', { n: 1 }));
    let lastError: string | null = null;
    await waitFor(async () => {
      lastError = (await rowsOf(app).findOneByOrFail({ messageId: id })).lastError;
      return lastError !== null;
    }, 'a failed attempt recorded');
    const row = await rowsOf(app).findOneByOrFail({ messageId: id });
    expect(row.status).toBe('pending');
    // Every failed attempt was given back (the broker unreachable), none counted toward maxAttempts. (The row's own
    // `attempts` is not read: a pass that claimed it again meanwhile shows the attempt it is making.)
    const history = await app.get(DataSource).getRepository(OutboxAttempt).findBy({ messageSeq: row.seq });
    expect(history.length).toBeGreaterThan(0);
    expect(history.filter((attempt) => attempt.counted)).toEqual([]);
    expect(lines.some((line) => line.includes('not checked yet'))).toBe(true);
    expect(lastError).not.toContain(secret);
    expect(lines.join('\n')).not.toContain(secret);
  });

  it('refuses to start when the stream does not exist, naming the option', async () => {
    const missing = Object.assign(Object.create(TestStream.prototype), { name: 'OUTBOX_NO_SUCH_STREAM' });
    const error = await jetStreamApp(db, missing).then(
      (app) => (apps.push(app), undefined),
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(OutboxConfigurationError);
    expect(String((error as Error).message)).toMatch(/option `stream` names JetStream stream 'OUTBOX_NO_SUCH_STREAM'/);
  });
});
