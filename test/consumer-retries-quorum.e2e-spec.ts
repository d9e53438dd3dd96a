import { Controller, INestApplication } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { Column, DataSource, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { getOutboxMessageId, Idempotent, OutboxDeadLetters, OutboxService } from '../src';
import { OutboxMessage } from '../src/schema/outbox-message.entity';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { deleteQueue, RABBITMQ_URL, rmqConsumerOptions, uniqueQueue } from './helpers/consumers';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/*
 * test/consumer-retries.e2e-spec.ts's poison message, on a RabbitMQ quorum queue: a quorum queue counts the
 * deliveries of a message (the `x-delivery-count` header, and a `delivery-limit` past which it drops or dead-letters
 * it), where a classic queue only sets `redelivered`. A failed message is acked once its inbox row is stored, so the
 * broker's count never grows with the retries; a redelivery (a requeue) carries the header, which the stored row
 * does not keep. Real RabbitMQ, prefetch 1.
 */

@Entity('test_quorum_entries')
class QuorumEntry {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 100 })
  messageId!: string;
}

const RETRY = { maxAttempts: 4, initialDelay: 200, factor: 2, maxDelay: 5000, jitter: 0 };
const state = {
  fixed: false,
  /** Ids whose runs fail for now (besides a poison message before `fixed`). */
  failing: new Set<string>(),
  /** Run times (ms) per message id, failed runs included. */
  runs: new Map<string, number[]>(),
  /** The `x-delivery-count` header of each broker delivery (undefined on a first delivery and on re-runs). */
  deliveryCounts: new Map<string, unknown[]>(),
};

@Controller()
class QuorumLedger {
  constructor(private readonly outbox: OutboxService) {}

  @EventPattern('QuorumLedger')
  @Idempotent({ manualAck: true, retryAfter: 0, retry: RETRY })
  async onLedger(@Payload() data: { n: number; poison?: boolean }, @Ctx() context: unknown) {
    const id = getOutboxMessageId(data, context) ?? 'none';
    state.runs.set(id, [...(state.runs.get(id) ?? []), Date.now()]);
    const headers = (
      context as { getMessage?: () => { properties?: { headers?: Record<string, unknown> } } }
    ).getMessage?.()?.properties?.headers;
    if (headers) state.deliveryCounts.set(id, [...(state.deliveryCounts.get(id) ?? []), headers['x-delivery-count']]);
    await this.outbox.manager.insert(QuorumEntry, { messageId: id }); // rolled back with the failure below
    if (data.poison && !state.fixed) throw new Error(`ledger rejects message ${data.n}`);
    if (state.failing.has(id)) throw new Error('still failing');
  }
}

const QUORUM = { durable: true, arguments: { 'x-queue-type': 'quorum' } };
const kinds: DatabaseKind[] = ['postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `@Idempotent({ retry }) consumer of a RabbitMQ quorum queue (prefetch 1) on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication | undefined;
      let ds: DataSource;
      let deadLetters: OutboxDeadLetters;
      let amqp: import('amqplib').ChannelModel;
      let channel: import('amqplib').Channel;
      const queue = uniqueQueue('outbox-retry-quorum');
      const run = `${kind}-${Date.now().toString(36)}`;
      const id = (name: string) => `${run}-${name}`;
      const destination = 'consumer:QuorumLedger.onLedger';

      beforeAll(async () => {
        state.fixed = false;
        db = await createTestDatabase(kind);
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [QuorumLedger],
          imports: [(await import('@nestjs/typeorm')).TypeOrmModule.forFeature([QuorumEntry])],
          outbox: { client: undefined, publisher: { pollingInterval: 50 } },
        });
        app = moduleRef.createNestApplication({ logger: false });
        const rmq = rmqConsumerOptions(queue) as { options: Record<string, unknown> };
        app.connectMicroservice({ ...rmq, options: { ...rmq.options, prefetchCount: 1, queueOptions: QUORUM } });
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
        await db?.drop();
      });

      const publish = (messageId: string, data: { n: number; poison?: boolean }) =>
        channel.sendToQueue(queue, Buffer.from(JSON.stringify({ pattern: 'QuorumLedger', data })), {
          messageId,
          persistent: true,
        });
      const applied = (messageId: string) => ds.getRepository(QuorumEntry).countBy({ messageId });
      const runsOf = (messageId: string) => state.runs.get(messageId)?.length ?? 0;
      const rowOf = (messageId: string) => ds.getRepository(OutboxMessage).findOneBy({ messageId });

      it('the queue the consumer declared is a quorum queue (a classic declaration of it is refused)', async () => {
        const probe = await amqp.createChannel();
        probe.on('error', () => undefined);
        await expect(
          probe.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'classic' } }),
        ).rejects.toThrow(/PRECONDITION_FAILED.*x-queue-type/);
      });

      it('a poison message among 200: the others are applied once each without stalling; it runs maxAttempts times with growing delays, then is one dead letter with its history; requeue() after the fix applies it once', async () => {
        const poison = id('poison');
        const ids: string[] = [];
        for (let n = 0; n < 200; n++) {
          const messageId = n === 20 ? poison : id(`m${n}`);
          ids.push(messageId);
          publish(messageId, { n, poison: n === 20 });
        }
        const others = ids.filter((m) => m !== poison);
        await waitFor(
          async () => (await ds.getRepository(QuorumEntry).count()) >= others.length,
          'the 199 others to be applied',
          60_000,
        );
        await waitFor(async () => (await rowOf(poison))?.status === 'dead', 'the poison message to go dead', 30_000);
        for (const m of others) expect(runsOf(m)).toBe(1);
        expect(await ds.getRepository(QuorumEntry).count()).toBe(others.length);
        expect(await applied(poison)).toBe(0);

        // The broker delivered the poison message once (no x-delivery-count: it was never returned to the queue);
        // the other runs came from its row, each later than the backoff allows.
        const times = state.runs.get(poison)!;
        expect(times).toHaveLength(RETRY.maxAttempts);
        expect(state.deliveryCounts.get(poison)).toEqual([undefined]);
        const gaps = times.slice(1).map((t, i) => t - times[i]);
        expect(gaps[0]).toBeGreaterThanOrEqual(200 - 20);
        expect(gaps[1]).toBeGreaterThanOrEqual(400 - 20);
        expect(gaps[2]).toBeGreaterThanOrEqual(800 - 20);

        expect(await deadLetters.count({ destination })).toBe(1);
        const detail = (await deadLetters.get(poison))!;
        expect(detail).toMatchObject({ messageId: poison, pattern: 'QuorumLedger', attempts: 4, destination });
        expect(JSON.parse(detail.payload)).toEqual({ n: 20, poison: true });
        expect(detail.history.map((h) => h.attempt)).toEqual([1, 2, 3, 4]);
        for (const h of detail.history) expect(h.error).toContain('ledger rejects message 20');
        // Nothing ready behind it while the consumer still runs (unacked ones: the last test).
        expect((await channel.checkQueue(queue)).messageCount).toBe(0);

        state.fixed = true;
        expect(await deadLetters.requeue([poison])).toBe(1);
        await waitFor(async () => (await applied(poison)) === 1, 'the requeued poison message to be applied');
        await waitFor(async () => (await rowOf(poison))?.status === 'sent', 'its row to be sent');
        expect(runsOf(poison)).toBe(RETRY.maxAttempts + 1);
        expect(await applied(poison)).toBe(1);
      }, 120_000);

      // The refusal is a PostgreSQL trigger; the path (store fails → requeue) is the same on every database.
      const onPostgres = kind === 'postgres' ? it : it.skip;
      onPostgres(
        'a message requeued while its row cannot be stored goes behind the next one and comes back with x-delivery-count; the row stored at a later delivery does not keep the header, and the message is applied once',
        async () => {
          const table = ds.getMetadata(OutboxMessage).tableName;
          await ds.query(
            `CREATE OR REPLACE FUNCTION test_refuse_quorum_inbox() RETURNS trigger AS $$ BEGIN ` +
              `IF NEW.destination LIKE 'consumer:%' THEN RAISE EXCEPTION 'inbox refused'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`,
          );
          await ds.query(
            `CREATE TRIGGER test_refuse_quorum_inbox BEFORE INSERT ON "${table}" FOR EACH ROW EXECUTE FUNCTION test_refuse_quorum_inbox()`,
          );
          const kept = id('kept');
          const behind = id('behind');
          state.failing.add(kept);
          try {
            publish(kept, { n: 5 });
            publish(behind, { n: 6 });
            await waitFor(() => runsOf(kept) >= 3, 'two redeliveries while the row cannot be stored');
            // A quorum queue hands a requeued message out again after those already behind it (a classic queue
            // puts it back at its place: with prefetch 1 it would hold them): the next message is applied while
            // this one still cannot be stored.
            await waitFor(async () => (await applied(behind)) === 1, 'the next message to be applied meanwhile');
            expect(await rowOf(kept)).toBeNull();
          } finally {
            await ds.query(`DROP TRIGGER test_refuse_quorum_inbox ON "${table}"`);
          }
          await waitFor(async () => (await rowOf(kept)) !== null, 'the row to be stored at a later redelivery');
          const counts = state.deliveryCounts.get(kept)!;
          expect(counts.slice(0, 3)).toEqual([undefined, 1, 2]); // the quorum queue counted each return
          expect(Object.keys(JSON.parse((await rowOf(kept))!.headers ?? '{}'))).not.toContain('x-delivery-count');
          state.failing.delete(kept);
          await waitFor(async () => (await rowOf(kept))?.status === 'sent', 'the row to complete');
          expect(await applied(kept)).toBe(1);
          await waitFor(async () => (await channel.checkQueue(queue)).messageCount === 0, 'the queue to drain');
        },
      );

      it('the queue ends with 0 ready and 0 unacked: once the consumer stops, nothing comes back to the queue', async () => {
        await app!.close();
        app = undefined;
        // The quorum queue drops the closed channel's consumer shortly after the close (its unacked messages, had
        // there been any, back to ready with it).
        await waitFor(async () => (await channel.checkQueue(queue)).consumerCount === 0, 'the consumer to be gone');
        expect((await channel.checkQueue(queue)).messageCount).toBe(0);
      });
    },
  );
}
