import type { INestApplication, LoggerService } from '@nestjs/common';
import { ClientProviderOptions, Transport } from '@nestjs/microservices';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { inspect } from 'node:util';
import { DataSource } from 'typeorm';
import { OUTBOX_CHANNELS, OutboxDeadLetters, OutboxHealthIndicator, OutboxPublisher, OutboxService } from '../src';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { freePort, waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/** Every line any logger of the app writes (Nest's clients included), objects rendered in full. */
class RecordingLogger implements LoggerService {
  readonly lines: string[] = [];
  private record = (...args: unknown[]) => {
    this.lines.push(args.map((a) => (typeof a === 'string' ? a : inspect(a, { depth: 5 }))).join(' '));
  };
  log = this.record;
  error = this.record;
  warn = this.record;
  debug = this.record;
  verbose = this.record;
  fatal = this.record;
}

/** A client with a password in its URL (or options), pointed at a port nothing listens on. */
const transports: Array<{
  name: string;
  client: (port: number, secret: string) => Omit<ClientProviderOptions, 'name'>;
}> = [
  {
    name: 'RabbitMQ',
    client: (port, secret) => ({
      transport: Transport.RMQ,
      options: {
        urls: [`amqp://guest:${secret}@127.0.0.1:${port}`],
        queue: 'redaction',
        socketOptions: { reconnectTimeInSeconds: 0.1 },
      },
    }),
  },
  {
    name: 'NATS',
    client: (port, secret) => ({
      transport: Transport.NATS,
      options: { servers: [`nats://app:${secret}@127.0.0.1:${port}`], reconnectTimeWait: 100 },
    }),
  },
  {
    name: 'MQTT',
    client: (port, secret) => ({
      transport: Transport.MQTT,
      options: { url: `mqtt://app:${secret}@127.0.0.1:${port}`, reconnectPeriod: 100 },
    }),
  },
  {
    name: 'Redis',
    client: (port, secret) => ({
      transport: Transport.REDIS,
      options: { host: '127.0.0.1', port, password: secret, retryAttempts: 10_000, retryDelay: 100 },
    }),
  },
];

const kinds: DatabaseKind[] = ['postgres', 'sqlite'];

for (const kind of kinds) {
  for (const transport of transports) {
    describeWith(
      servicesOf(kind),
      `No credential of a ${transport.name} client reaches a log, row, event or listing on ${DATABASE_LABEL[kind]}`,
      () => {
        const secret = `Pw${transport.name}${Date.now().toString(36)}Xq`;
        const logger = new RecordingLogger();
        const events: unknown[] = [];
        const channelListeners = Object.values(OUTBOX_CHANNELS).map(
          (name) => [name, (e: unknown) => events.push(e)] as const,
        );
        let db: TestDatabase;
        let app: INestApplication;
        let port: number;

        beforeAll(async () => {
          db = await createTestDatabase(kind);
          port = await freePort();
          const moduleRef = await createOutboxTestingModule({
            db,
            client: transport.client(port, secret),
            outbox: {
              publisher: { pollingInterval: 50, publishTimeout: 500 },
              retry: { maxAttempts: 1000, initialDelay: 20, maxDelay: 100 },
            },
          });
          app = moduleRef.createNestApplication({ logger });
          for (const [name, listener] of channelListeners) subscribe(name, listener);
          await app.init();
          const publisher = app.get(OutboxPublisher);
          for (const event of ['retry', 'dead', 'leaseLost', 'published'] as const)
            publisher.on(event, (e) => events.push(e));
        });

        afterAll(async () => {
          for (const [name, listener] of channelListeners) unsubscribe(name, listener);
          await app?.close();
          await db?.drop();
        });

        it('keeps the password out of last_error, dead letters, logs, events and health details', async () => {
          const outbox = app.get(OutboxService);
          const ds = app.get(DataSource);
          const ids = await outbox.transaction(async () => [
            await outbox.emit('OrderPlaced', { n: 1 }),
            await outbox.emit('OrderPlaced', { n: 2 }),
          ]);
          const lastErrors = async () =>
            (await ds.query(`SELECT last_error FROM outbox_messages`)).map(
              (r: { last_error: string | null }) => r.last_error,
            );
          await waitFor(
            async () => (await lastErrors()).every((e: string | null) => e !== null),
            'the failed attempts to be recorded',
          );
          await waitFor(() => events.length >= 8, 'a few retry events');

          // A dead row as an earlier version stored it, with the client's URL in its error.
          const p = (i: number) => (kind === 'postgres' ? `$${i}` : '?');
          const legacy = `Error: connect ECONNREFUSED (amqp://guest:${secret}@127.0.0.1:${port})`;
          await ds.query(
            `UPDATE outbox_messages SET status = 'dead', last_error = ${p(1)} WHERE message_id = ${p(2)}`,
            [legacy, ids[0]],
          );
          const deadLetters = await app.get(OutboxDeadLetters).list();

          const health = await app.get(OutboxHealthIndicator).isHealthy('outbox', { maxDead: 0 });
          const stored = (await lastErrors()).filter((e: string) => e !== legacy);
          const sinks: Record<string, string> = {
            lastError: JSON.stringify(stored),
            deadLetters: JSON.stringify(deadLetters),
            logs: logger.lines.join('\n'),
            events: JSON.stringify(events),
            health: JSON.stringify(health),
          };
          expect(stored.length).toBeGreaterThan(0);
          expect(logger.lines.length).toBeGreaterThan(0);
          for (const [sink, text] of Object.entries(sinks))
            expect({ sink, leaked: text.includes(secret) }).toEqual({ sink, leaked: false });
          expect(deadLetters.find((m) => m.messageId === ids[0])?.lastError).toContain(`amqp://***@127.0.0.1:${port}`);
          // The host stays, for operators.
          if (transport.name === 'RabbitMQ') expect(stored[0]).toContain(`amqp://***@127.0.0.1:${port}`);
        });
      },
    );
  }
}
