import { Controller, INestApplication } from '@nestjs/common';
import { Ctx, EventPattern, Payload, RmqContext } from '@nestjs/microservices';
import { Column, DataSource, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { getOutboxMessageId, Idempotent, OutboxDeadLetters, OutboxService } from '../src';
import * as settlement from '../src/idempotency/message-settlement';
import { OutboxMessage } from '../src/schema/outbox-message.entity';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { deleteQueue, RABBITMQ_URL, rmqConsumerOptions, uniqueQueue } from './helpers/consumers';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/*
 * @Idempotent({ mode: 'accept-first' }) on broker consumers: each message is stored as an inbox row and acked at
 * once, and the relay runs the handler from the row, applied once under the message's record. Real RabbitMQ,
 * prefetch 1 (a message left unacked would hold the next one back).
 */

@Entity('test_accept_first_entries')
class Entry {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 100 })
  messageId!: string;
}

interface AcceptMessage {
  n: number;
  /** Waits for `state.open` before writing: a handler slower than any broker lease. */
  gated?: boolean;
  /** Fails until `state.fixed`. */
  poison?: boolean;
}

const state = {
  fixed: false,
  /** Resolves the gate of `gated` messages. */
  open: () => {},
  gate: Promise.resolve(),
  /** Runs started per message id (failed ones included). */
  runs: new Map<string, number>(),
  /** Handler runs started and not ended. */
  running: 0,
  /** What `@Ctx()` was on each run (its class name). */
  contexts: [] as string[],
  /** The message ids whose ack the test drops (a crash between storing the row and the ack). */
  dropAck: new Set<string>(),
  /** Whether a dropped ack happened. */
  dropped: new Set<string>(),
};

function closeGate(): void {
  state.gate = new Promise<void>((resolve) => (state.open = resolve));
}

async function handle(outbox: OutboxService, data: AcceptMessage, context: unknown): Promise<void> {
  const id = getOutboxMessageId(data, context) ?? 'none';
  state.runs.set(id, (state.runs.get(id) ?? 0) + 1);
  state.contexts.push((context as object)?.constructor?.name ?? '?');
  state.running++;
  try {
    if (data.gated) await state.gate;
    await outbox.manager.insert(Entry, { messageId: id }); // rolled back with the failure below
    if (data.poison && !state.fixed) throw new Error(`ledger rejects message ${data.n}`);
  } finally {
    state.running--;
  }
}

const RETRY = { maxAttempts: 3, initialDelay: 100, factor: 2, maxDelay: 1000, jitter: 0 };

@Controller()
class AcceptConsumer {
  constructor(private readonly outbox: OutboxService) {}

  @EventPattern('Accept')
  // Set: Nest puts every handler on both queues of the app (noAck false and true), so it cannot be derived.
  @Idempotent({ mode: 'accept-first', manualAck: true, retry: RETRY })
  onAccept(@Payload() data: AcceptMessage, @Ctx() context: unknown) {
    return handle(this.outbox, data, context);
  }
}

/** A `noAck: true` queue: nothing to ack; the row is what keeps the message. */
@Controller()
class AutoAckAcceptConsumer {
  constructor(private readonly outbox: OutboxService) {}

  @EventPattern('AcceptAuto')
  @Idempotent({ mode: 'accept-first', manualAck: false, retry: RETRY })
  onAcceptAuto(@Payload() data: AcceptMessage, @Ctx() context: unknown) {
    return handle(this.outbox, data, context);
  }
}

const kinds: DatabaseKind[] = ['postgres', 'mariadb', 'sqlite'];

for (const kind of kinds) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `@Idempotent({ mode: 'accept-first' }) broker consumers (RabbitMQ, prefetch 1) on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication | undefined;
      let ds: DataSource;
      let amqp: import('amqplib').ChannelModel;
      let channel: import('amqplib').Channel;
      const queue = uniqueQueue('outbox-accept');
      const autoAckQueue = uniqueQueue('outbox-accept-noack');
      const run = `${kind}-${Date.now().toString(36)}`;
      const id = (name: string) => `${run}-${name}`;
      const realSettle = settlement.settle;

      async function startApp(): Promise<INestApplication> {
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [AcceptConsumer, AutoAckAcceptConsumer],
          imports: [(await import('@nestjs/typeorm')).TypeOrmModule.forFeature([Entry])],
          // No broker client: the consumers' inbox rows are the outbox's only destinations.
          outbox: { client: undefined, publisher: { pollingInterval: 50 } },
        });
        const started = moduleRef.createNestApplication({
          logger: process.env.TEST_LOG ? ['log', 'warn', 'error', 'debug'] : false,
        });
        const rmq = rmqConsumerOptions(queue) as { options: Record<string, unknown> };
        started.connectMicroservice({ ...rmq, options: { ...rmq.options, prefetchCount: 1 } });
        const auto = rmqConsumerOptions(autoAckQueue) as { options: Record<string, unknown> };
        started.connectMicroservice({ ...auto, options: { ...auto.options, noAck: true, prefetchCount: 1 } });
        await started.startAllMicroservices();
        await started.init();
        return started;
      }

      beforeAll(async () => {
        state.fixed = false;
        db = await createTestDatabase(kind);
        app = await startApp();
        ds = app.get(DataSource);
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        amqp = await (require('amqplib') as typeof import('amqplib')).connect(RABBITMQ_URL);
        channel = await amqp.createChannel();
        // The test-only crash: the ack of a listed message is never sent, as if the process died right after the
        // row was stored. Every other settlement goes through.
        jest.spyOn(settlement, 'settle').mockImplementation((context, options, how, logger) => {
          const rpc = context.getArgByIndex(1);
          const messageId = rpc instanceof RmqContext ? (rpc.getMessage() as any).properties?.messageId : undefined;
          if (how === 'ack' && state.dropAck.has(messageId)) {
            state.dropped.add(messageId);
            return true;
          }
          return realSettle(context, options, how, logger);
        });
      });

      afterAll(async () => {
        jest.restoreAllMocks();
        state.open();
        await amqp?.close();
        await app?.close();
        await deleteQueue(queue);
        await deleteQueue(autoAckQueue);
        await db?.drop();
      });

      const publish = (messageId: string, data: AcceptMessage, to = queue, pattern = 'Accept') =>
        channel.sendToQueue(to, Buffer.from(JSON.stringify({ pattern, data })), { messageId, persistent: true });
      const applied = (messageId: string) => ds.getRepository(Entry).countBy({ messageId });
      const runsOf = (messageId: string) => state.runs.get(messageId) ?? 0;
      const rowsOf = (messageId: string) => ds.getRepository(OutboxMessage).countBy({ messageId });
      const rowOf = (messageId: string) => ds.getRepository(OutboxMessage).findOneBy({ messageId });
      const destination = 'consumer:AcceptConsumer.onAccept';
      // SQLite has one writer: a handler holding its transaction open (the gate) holds back the next message's row
      // until it ends, so a slow handler cannot be shown acked-while-running there (docs/idempotency.md says so).
      const whileHandlersWait = kind === 'sqlite' ? it.skip : it;

      whileHandlersWait(
        'a slow handler: every message is acked as soon as its row is stored, while the handler still runs; each is then applied once from its row',
        async () => {
          closeGate();
          const slow = [id('slow-1'), id('slow-2'), id('slow-3')];
          slow.forEach((messageId, n) => publish(messageId, { n, gated: true }));
          // Prefetch 1: the broker hands out the next message only once the one before it is acked, so a row for
          // the last message (not gated) means every slow one was acked, their handlers still waiting at the gate.
          const last = id('after-slow');
          publish(last, { n: 9 });
          await waitFor(async () => (await rowsOf(last)) === 1, 'the message after the slow ones to be stored');
          for (const messageId of slow) expect(await rowsOf(messageId)).toBe(1);
          await waitFor(() => state.running > 0, 'a slow handler to run from its row');
          for (const messageId of slow) expect(await applied(messageId)).toBe(0); // …and none has written yet
          expect((await channel.checkQueue(queue)).messageCount).toBe(0); // nothing ready: all were taken and acked

          state.open();
          for (const messageId of slow) {
            await waitFor(async () => (await rowOf(messageId))?.status === 'sent', `${messageId}'s row to be sent`);
            expect(await applied(messageId)).toBe(1);
            expect(runsOf(messageId)).toBe(1);
            expect((await rowOf(messageId))!.destination).toBe(destination);
          }
          // Every run was from its row (never at the broker's delivery), under the message's record.
          expect(state.contexts.every((c) => c === 'OutboxRetryContext')).toBe(true);
          const records = await ds.getRepository(IdempotencyRecord).countBy({ scope: 'AcceptConsumer.onAccept' });
          expect(records).toBe(4);
        },
      );

      whileHandlersWait('a redelivered message (same id) stores no second row and is applied once', async () => {
        closeGate();
        const twice = id('twice');
        publish(twice, { n: 1, gated: true }); // its row is pending (the handler waits) when the copy comes
        publish(twice, { n: 1, gated: true });
        const last = id('after-twice');
        publish(last, { n: 2 });
        await waitFor(async () => (await rowsOf(last)) === 1, 'the message after the copies to be stored');
        expect(await rowsOf(twice)).toBe(1);
        state.open();
        await waitFor(async () => (await rowOf(twice))?.status === 'sent', 'the row to be sent');
        // Once more after its row was sent: still one row, nothing run again.
        publish(twice, { n: 1 });
        const after = id('after-sent');
        publish(after, { n: 3 });
        await waitFor(async () => (await applied(after)) === 1, 'the message after the third copy to be applied');
        expect(await rowsOf(twice)).toBe(1);
        expect(await applied(twice)).toBe(1);
        expect(runsOf(twice)).toBe(1);
        expect((await channel.checkQueue(queue)).messageCount).toBe(0);
      });

      it('a failing handler is retried from its row, then a dead letter; requeue() after the fix applies it once', async () => {
        const deadLetters = app!.get(OutboxDeadLetters);
        const poison = id('poison');
        publish(poison, { n: 5, poison: true });
        await waitFor(async () => (await rowOf(poison))?.status === 'dead', 'the message to go dead');
        expect(runsOf(poison)).toBe(RETRY.maxAttempts);
        expect(await applied(poison)).toBe(0);
        const detail = (await deadLetters.get(poison))!;
        expect(detail).toMatchObject({ attempts: RETRY.maxAttempts, destination, pattern: 'Accept' });
        expect(detail.history.map((h) => h.attempt)).toEqual([1, 2, 3]);
        expect(detail.lastError).toContain('ledger rejects message 5');
        state.fixed = true;
        expect(await deadLetters.requeue([poison])).toBe(1);
        await waitFor(async () => (await rowOf(poison))?.status === 'sent', 'the requeued row to be sent');
        expect(await applied(poison)).toBe(1);
        expect(runsOf(poison)).toBe(RETRY.maxAttempts + 1);
      });

      it('noAck consumer: the accepted message is stored and applied once from its row', async () => {
        const auto = id('auto');
        publish(auto, { n: 6 }, autoAckQueue, 'AcceptAuto');
        await waitFor(async () => (await rowOf(auto))?.status === 'sent', 'its row to be sent');
        expect((await rowOf(auto))!.destination).toBe('consumer:AutoAckAcceptConsumer.onAcceptAuto');
        expect(await applied(auto)).toBe(1);
        expect(runsOf(auto)).toBe(1);
      });

      it('a crash between storing the row and the ack: the broker redelivers, the copy stores nothing, the message is applied once', async () => {
        const crash = id('crash');
        state.dropAck.add(crash);
        publish(crash, { n: 7 });
        await waitFor(async () => state.dropped.has(crash), 'the row to be stored and its ack dropped');
        expect(await rowsOf(crash)).toBe(1);
        // The process "dies": its connection closes with the message unacked, and the broker takes it back.
        await app!.close();
        app = undefined;
        state.dropAck.delete(crash);
        app = await startApp();
        ds = app.get(DataSource);
        await waitFor(async () => (await rowOf(crash))?.status === 'sent', 'the row to be sent');
        await waitFor(async () => (await channel.checkQueue(queue)).messageCount === 0, 'the queue to drain');
        // The redelivery reached the new app (its copy found the row and was acked).
        const last = id('after-crash');
        publish(last, { n: 8 });
        await waitFor(async () => (await applied(last)) === 1, 'the message after it to be applied');
        expect(await rowsOf(crash)).toBe(1);
        expect(await applied(crash)).toBe(1);
        expect(runsOf(crash)).toBe(1);
      });

      it('the queue ends with 0 ready and 0 unacked: once the consumer stops, nothing comes back to the queue', async () => {
        await app!.close();
        app = undefined;
        expect((await channel.checkQueue(queue)).messageCount).toBe(0);
        expect((await channel.checkQueue(autoAckQueue)).messageCount).toBe(0);
      });
    },
  );
}
