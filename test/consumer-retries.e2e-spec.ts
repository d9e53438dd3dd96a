import { Controller, INestApplication, PipeTransform } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { AggregationTemporality, type DataPoint, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { Column, DataSource, Entity, PrimaryGeneratedColumn } from 'typeorm';
import {
  getOutboxMessageId,
  IdempotencyKey,
  Idempotent,
  OutboxDeadLetters,
  OutboxNonRetryableError,
  OutboxRetryContext,
  OutboxService,
} from '../src';
import { OutboxMessage } from '../src/schema/outbox-message.entity';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { deleteQueue, RABBITMQ_URL, rmqConsumerOptions, uniqueQueue } from './helpers/consumers';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/*
 * Broker consumers under @Idempotent({ retry }): a failed message is stored as an inbox row and acked, the relay
 * retries it with backoff, then it is a dead letter; requeue() applies it once. Real RabbitMQ, prefetch 1.
 */

/** One applied effect: a row per application (a message applied twice would have two). */
@Entity('test_consumer_entries')
class Entry {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 100 })
  messageId!: string;
}

interface LedgerMessage {
  n: number;
  /** Fails until `state.fixed`. */
  poison?: boolean;
  /** Throws OutboxNonRetryableError. */
  fatal?: boolean;
  /** Fails this many times, then succeeds. */
  failTimes?: number;
  /** Sleeps this long (ms) before writing, on runs after the first. */
  slow?: number;
  /** Fails while its id is in `state.failing`. */
  failWhileListed?: boolean;
  /** Throws OutboxNonRetryableError while its id is in `state.failing`. */
  fatalWhileListed?: boolean;
  /** Once applied, emits `LedgerApplied` (id `<message id>-applied`, due in an hour: it stays in the outbox). */
  emitOnApply?: boolean;
}

/** Marks the data it passed through: a re-run from the row must run the parameter's pipes too. */
class MarkPipe implements PipeTransform {
  transform(value: LedgerMessage) {
    return { ...value, piped: true };
  }
}

const state = {
  fixed: false,
  /** Ids of `failWhileListed` messages that fail for now. */
  failing: new Set<string>(),
  /** What `@IdempotencyKey()` gave AutoAckConsumer on each run. */
  keys: [] as unknown[],
  /** Whether each run's data went through `MarkPipe`, per message id. */
  piped: new Map<string, boolean[]>(),
  /** Run times (ms) per message id, failed runs included. */
  runs: new Map<string, number[]>(),
  /** What `@Ctx()` was on each run (its class name). */
  contexts: new Map<string, string[]>(),
  /** Per message id, whether each run was a dry run (`OutboxRetryContext.isDryRun()`). */
  dryRuns: new Map<string, boolean[]>(),
};

/** A reader that collects on demand (what a Prometheus scrape does). */
class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

/** The sum of the points of instrument `name` whose attributes include `match`. */
async function counted(reader: TestReader, name: string, match: Record<string, unknown>): Promise<number> {
  const { resourceMetrics } = await reader.collect();
  const metric = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === name);
  const points = (metric?.dataPoints ?? []) as Array<DataPoint<number>>;
  const matches = (p: DataPoint<number>) =>
    Object.entries(match).every(([k, v]) => (v === undefined ? !(k in p.attributes) : p.attributes[k] === v));
  return points.filter(matches).reduce((sum, p) => sum + p.value, 0);
}

const RETRY = { maxAttempts: 4, initialDelay: 200, factor: 2, maxDelay: 5000, jitter: 0 };
/** Messages of the poison test (the prefetch-1 scenario: one poison message among 500). */
const MESSAGES = 500;

async function handle(outbox: OutboxService, data: LedgerMessage, context: unknown): Promise<void> {
  const id = getOutboxMessageId(data, context) ?? 'none';
  const runs = state.runs.get(id) ?? [];
  runs.push(Date.now());
  state.runs.set(id, runs);
  state.piped.set(id, [...(state.piped.get(id) ?? []), (data as { piped?: boolean }).piped === true]);
  state.contexts.set(id, [...(state.contexts.get(id) ?? []), (context as object)?.constructor?.name ?? '?']);
  const dryRun = context instanceof OutboxRetryContext && context.isDryRun();
  state.dryRuns.set(id, [...(state.dryRuns.get(id) ?? []), dryRun]);
  if (data.slow && runs.length > 1) await new Promise((r) => setTimeout(r, data.slow));
  await outbox.manager.insert(Entry, { messageId: id }); // rolled back with the failure below
  if (data.fatal) throw new OutboxNonRetryableError(`message ${data.n} can never be applied`);
  if (data.poison && !state.fixed) throw new Error(`ledger rejects message ${data.n}`);
  if (data.failWhileListed && state.failing.has(id)) throw new Error('still failing');
  if (data.fatalWhileListed && state.failing.has(id)) throw new OutboxNonRetryableError('ledger refuses it for now');
  if (data.failTimes !== undefined && runs.length <= data.failTimes) throw new Error(`transient ${runs.length}`);
  if (data.emitOnApply) {
    const availableAt = new Date(Date.now() + 3_600_000);
    await outbox.emit('LedgerApplied', { n: data.n }, { messageId: `${id}-applied`, availableAt });
  }
}

@Controller()
class LedgerConsumer {
  constructor(private readonly outbox: OutboxService) {}

  @EventPattern('Ledger')
  @Idempotent({ manualAck: true, retryAfter: 0, retry: RETRY })
  onLedger(@Payload(new MarkPipe()) data: LedgerMessage, @Ctx() context: unknown) {
    return handle(this.outbox, data, context);
  }
}

/** Consumer of a `noAck: true` queue: the server forgets a message once delivered, so only the row keeps it. */
@Controller()
class AutoAckConsumer {
  constructor(private readonly outbox: OutboxService) {}

  @EventPattern('AutoAck')
  @Idempotent({ retry: RETRY })
  onAutoAck(@Payload() data: LedgerMessage, @Ctx() context: unknown, @IdempotencyKey() key: unknown) {
    state.keys.push(key);
    return handle(this.outbox, data, context);
  }
}

const kinds: DatabaseKind[] = ['postgres', 'mariadb', 'sqlite'];

for (const kind of kinds) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `@Idempotent({ retry }) broker consumers (RabbitMQ, prefetch 1) on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let ds: DataSource;
      let deadLetters: OutboxDeadLetters;
      let amqp: import('amqplib').ChannelModel;
      let channel: import('amqplib').Channel;
      const reader = new TestReader();
      const meterProvider = new MeterProvider({ readers: [reader] });
      const queue = uniqueQueue('outbox-retry');
      const autoAckQueue = uniqueQueue('outbox-retry-noack');
      const run = `${kind}-${Date.now().toString(36)}`;
      const id = (name: string) => `${run}-${name}`;

      beforeAll(async () => {
        state.fixed = false;
        db = await createTestDatabase(kind);
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [LedgerConsumer, AutoAckConsumer],
          imports: [(await import('@nestjs/typeorm')).TypeOrmModule.forFeature([Entry])],
          // No broker client: the consumers' inbox rows are the outbox's only destinations.
          outbox: { client: undefined, publisher: { pollingInterval: 50 }, metrics: { meterProvider } },
        });
        app = moduleRef.createNestApplication({ logger: false });
        const rmq = rmqConsumerOptions(queue) as { options: Record<string, unknown> };
        app.connectMicroservice({ ...rmq, options: { ...rmq.options, prefetchCount: 1 } });
        const auto = rmqConsumerOptions(autoAckQueue) as { options: Record<string, unknown> };
        app.connectMicroservice({ ...auto, options: { ...auto.options, noAck: true, prefetchCount: 1 } });
        await app.startAllMicroservices();
        await app.init();
        ds = app.get(DataSource);
        deadLetters = app.get(OutboxDeadLetters);
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        amqp = await (require('amqplib') as typeof import('amqplib')).connect(RABBITMQ_URL);
        channel = await amqp.createChannel();
      });

      afterAll(async () => {
        await amqp?.close();
        await app?.close();
        await deleteQueue(queue);
        await deleteQueue(autoAckQueue);
        await db?.drop();
        await meterProvider.shutdown();
      });

      const publish = (messageId: string, data: LedgerMessage, to = queue, pattern = 'Ledger') =>
        channel.sendToQueue(to, Buffer.from(JSON.stringify({ pattern, data })), { messageId, persistent: true });
      const applied = (messageId: string) => ds.getRepository(Entry).countBy({ messageId });
      const runsOf = (messageId: string) => state.runs.get(messageId)?.length ?? 0;
      const rowOf = (messageId: string) => ds.getRepository(OutboxMessage).findOneBy({ messageId });
      const destination = 'consumer:LedgerConsumer.onLedger';

      it('a poison message among 500: the others are applied once each without stalling; it runs maxAttempts times with growing delays, then is one dead letter with its history; requeue() after the fix applies it once', async () => {
        const poison = id('poison');
        const ids: string[] = [];
        for (let n = 0; n < MESSAGES; n++) {
          const messageId = n === 20 ? poison : id(`m${n}`);
          ids.push(messageId);
          publish(messageId, { n, poison: n === 20 });
        }
        const others = ids.filter((m) => m !== poison);
        await waitFor(
          async () => (await ds.getRepository(Entry).count()) >= others.length,
          `the ${MESSAGES - 1} others to be applied`,
          60_000,
        );
        await waitFor(async () => (await rowOf(poison))?.status === 'dead', 'the poison message to go dead', 30_000);
        for (const m of others) expect(runsOf(m)).toBe(1);
        expect(await ds.getRepository(Entry).count()).toBe(others.length);
        expect(await applied(poison)).toBe(0);

        // Exactly maxAttempts runs (the broker's delivery and 3 from the row), each later than the backoff allows.
        const times = state.runs.get(poison)!;
        expect(times).toHaveLength(RETRY.maxAttempts);
        const gaps = times.slice(1).map((t, i) => t - times[i]);
        expect(gaps[0]).toBeGreaterThanOrEqual(200 - 20);
        expect(gaps[1]).toBeGreaterThanOrEqual(400 - 20);
        expect(gaps[2]).toBeGreaterThanOrEqual(800 - 20);
        // The re-runs got the documented context, the first the broker's.
        expect(state.contexts.get(poison)).toEqual(['RmqContext', ...Array(3).fill('OutboxRetryContext')]);
        expect(state.piped.get(poison)).toEqual([true, true, true, true]);

        expect(await deadLetters.count({ destination })).toBe(1);
        const page = await deadLetters.page({ destination });
        expect(page.items).toHaveLength(1);
        expect(page.items[0]).toMatchObject({ messageId: poison, pattern: 'Ledger', attempts: 4, destination });
        expect(page.items[0].lastError).toContain('ledger rejects message 20');
        const detail = (await deadLetters.get(poison))!;
        expect(JSON.parse(detail.payload)).toEqual({ n: 20, poison: true });
        expect(detail.history.map((h) => h.attempt)).toEqual([1, 2, 3, 4]);
        for (const h of detail.history) expect(h.error).toContain('ledger rejects message 20');

        // The metrics: the first delivery's failure as an idempotency outcome, the row's runs as handler runs.
        const consumer = 'LedgerConsumer.onLedger';
        const requests = 'outbox.idempotency.requests';
        expect(
          await counted(reader, requests, {
            'outbox.idempotency.consumer': consumer,
            'outbox.idempotency.outcome': 'failed',
          }),
        ).toBe(1);
        expect(
          await counted(reader, requests, {
            'outbox.idempotency.consumer': consumer,
            'outbox.idempotency.outcome': 'executed',
          }),
        ).toBe(MESSAGES - 1);
        const runs = { 'outbox.handler.name': consumer, 'messaging.destination.name': 'Ledger' };
        expect(
          await counted(reader, 'outbox.handler.runs', { ...runs, 'error.type': 'OutboxHandlerFailedError' }),
        ).toBe(3);
        expect(await counted(reader, 'outbox.messages.retried', { 'messaging.destination.name': 'Ledger' })).toBe(2);
        expect(await counted(reader, 'outbox.messages.dead_lettered', { 'messaging.destination.name': 'Ledger' })).toBe(
          1,
        );
        expect(await counted(reader, 'messaging.client.sent.messages', {})).toBe(0); // handler runs, not sends

        state.fixed = true;
        expect(await deadLetters.requeue([poison])).toBe(1);
        await waitFor(async () => (await applied(poison)) === 1, 'the requeued poison message to be applied');
        await waitFor(async () => (await rowOf(poison))?.status === 'sent', 'its row to be sent');
        expect(runsOf(poison)).toBe(RETRY.maxAttempts + 1);
        await waitFor(
          async () => (await counted(reader, 'outbox.handler.runs', { ...runs, 'error.type': undefined })) === 1,
          'the successful run to be counted',
        );
        expect(await applied(poison)).toBe(1);
        const records = await ds.getRepository(IdempotencyRecord).countBy({ scope: 'LedgerConsumer.onLedger' });
        expect(records).toBe(MESSAGES);
        // Nothing ready behind it (unacked ones are checked when the consumer stops, in the last test).
        expect((await channel.checkQueue(queue)).messageCount).toBe(0);
      }, 120_000);

      it('OutboxNonRetryableError: a dead letter at once, after one run', async () => {
        const fatal = id('fatal');
        publish(fatal, { n: 1, fatal: true });
        await waitFor(async () => (await rowOf(fatal))?.status === 'dead', 'the message to go dead');
        expect(runsOf(fatal)).toBe(1);
        expect((await deadLetters.get(fatal))!.attempts).toBe(1);
        expect(await applied(fatal)).toBe(0);
      });

      it('dryRun() of a dead consumer row runs the consumer in a rolled-back transaction: its error while it fails, ok once fixed; nothing applied until requeue()', async () => {
        const held = id('held');
        state.failing.add(held);
        publish(held, { n: 4, fatalWhileListed: true });
        await waitFor(async () => (await rowOf(held))?.status === 'dead', 'the message to go dead');
        const failing = await deadLetters.dryRun([held]);
        expect(failing).toMatchObject({ tried: 1, ok: 0, failed: 1 });
        expect(failing.results[0].targets).toEqual([
          expect.objectContaining({
            kind: 'consumer',
            destination: 'consumer:LedgerConsumer.onLedger',
            ok: false,
            error: expect.objectContaining({ message: expect.stringContaining('ledger refuses it for now') }),
          }),
        ]);
        state.failing.delete(held);
        const fixed = await deadLetters.dryRun([held]);
        expect(fixed).toMatchObject({ tried: 1, ok: 1, failed: 0 });
        expect(fixed.results[0].targets[0]).toMatchObject({ kind: 'consumer', ok: true, outcome: 'ran' });
        // The two tries ran the handler (through its pipes, told it was a dry run) and committed nothing.
        expect(state.dryRuns.get(held)).toEqual([false, true, true]);
        expect(state.piped.get(held)).toEqual([true, true, true]);
        expect(await applied(held)).toBe(0);
        expect(await ds.getRepository(IdempotencyRecord).countBy({ key: held })).toBe(0);
        expect((await rowOf(held))?.status).toBe('dead');
        expect(await deadLetters.requeue([held])).toBe(1);
        await waitFor(async () => (await applied(held)) === 1, 'the requeued message to be applied');
        expect(state.dryRuns.get(held)).toEqual([false, true, true, false]);
      });

      it("what a re-run from the row emits records the consumer's record as its cause (trace)", async () => {
        const chained = id('chained');
        publish(chained, { n: 6, failTimes: 1, emitOnApply: true });
        await waitFor(async () => (await applied(chained)) === 1, 'the message to be applied on its retry');
        expect(runsOf(chained)).toBe(2);
        const emitted = await ds.getRepository(OutboxMessage).findOneByOrFail({ messageId: `${chained}-applied` });
        expect({ scope: emitted.causeScope, key: emitted.causeKey }).toEqual({
          scope: 'LedgerConsumer.onLedger',
          key: chained,
        });
        const trace = await app.get(OutboxService).trace(chained);
        expect(trace.message?.consumers.map((c) => c.emitted.map((m) => m.messageId))).toEqual([
          [`${chained}-applied`],
        ]);
      });

      it('a broker redelivery racing the stored row is applied once', async () => {
        const race = id('race');
        // Fails its first run; the later ones are slow, so the row's retry and the redelivery overlap.
        publish(race, { n: 2, failTimes: 1, slow: 400 });
        await waitFor(async () => (await rowOf(race)) !== null, 'the inbox row to be stored');
        publish(race, { n: 2, failTimes: 1, slow: 400 });
        publish(race, { n: 2, failTimes: 1, slow: 400 });
        await waitFor(async () => (await rowOf(race))?.status === 'sent', 'the row to complete');
        await waitFor(async () => (await channel.checkQueue(queue)).messageCount === 0, 'the queue to drain');
        await waitFor(async () => runsOf(race) >= 2, 'a second run');
        expect(await applied(race)).toBe(1);
        const rows = await ds.getRepository(OutboxMessage).countBy({ messageId: race });
        expect(rows).toBe(1); // the redeliveries never stored a second row
      });

      it('noAck consumer: a failed message is not lost — the stored row is retried and applied once when it succeeds', async () => {
        const auto = id('auto');
        publish(auto, { n: 3, failTimes: 2 }, autoAckQueue, 'AutoAck');
        await waitFor(async () => (await applied(auto)) === 1, 'the message to be applied');
        await waitFor(async () => (await rowOf(auto))?.status === 'sent', 'its row to be sent');
        expect(runsOf(auto)).toBe(3);
        expect(state.keys.slice(-3)).toEqual([auto, auto, auto]); // the broker's run and the two from the row
        expect((await rowOf(auto))!.destination).toBe('consumer:AutoAckConsumer.onAutoAck');
        expect(await applied(auto)).toBe(1);
      });

      // The refusal is a PostgreSQL trigger; the path (store fails → requeue) is the same on every database.
      const onPostgres = kind === 'postgres' ? it : it.skip;
      onPostgres(
        'the row cannot be stored (the database refuses it): the message stays with the broker, redelivered until it is stored, then applied once',
        async () => {
          const table = ds.getMetadata(OutboxMessage).tableName;
          await ds.query(
            `CREATE OR REPLACE FUNCTION test_refuse_inbox() RETURNS trigger AS $$ BEGIN ` +
              `IF NEW.destination LIKE 'consumer:%' THEN RAISE EXCEPTION 'inbox refused'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`,
          );
          await ds.query(
            `CREATE TRIGGER test_refuse_inbox BEFORE INSERT ON "${table}" FOR EACH ROW EXECUTE FUNCTION test_refuse_inbox()`,
          );
          const kept = id('kept');
          state.failing.add(kept);
          try {
            publish(kept, { n: 4, failWhileListed: true });
            await waitFor(() => runsOf(kept) >= 3, 'two redeliveries while the row cannot be stored');
            expect(await rowOf(kept)).toBeNull();
          } finally {
            await ds.query(`DROP TRIGGER test_refuse_inbox ON "${table}"`);
          }
          await waitFor(async () => (await rowOf(kept)) !== null, 'the row to be stored at a later redelivery');
          state.failing.delete(kept);
          await waitFor(async () => (await rowOf(kept))?.status === 'sent', 'the row to complete');
          expect(await applied(kept)).toBe(1);
          await waitFor(async () => (await channel.checkQueue(queue)).messageCount === 0, 'the queue to drain');
        },
      );

      it('the queue ends with 0 ready and 0 unacked: once the consumer stops, nothing comes back to the queue', async () => {
        await app.close();
        app = undefined as never;
        const { messageCount } = await channel.checkQueue(queue);
        expect(messageCount).toBe(0);
      });
    },
  );
}
