import { Controller, INestApplication, LoggerService } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import { Column, DataSource, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { Idempotent, OutboxService } from '../src';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { deleteQueue, RABBITMQ_URL, rmqClientOptions, rmqConsumerOptions, uniqueQueue } from './helpers/consumers';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

@Entity('test_notes')
class Note {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 100 })
  ref!: string;
}

/** Runs per ref, and refs whose handler throws once after its write. */
const seen = { runs: new Map<string, number>(), failOnce: new Set<string>() };

/**
 * The refs of the messages the consumer acknowledged, observed on amqplib's Channel.ack (called through): a note is
 * visible at the commit, a moment before its message is acked, so a test waits for the ack before it closes the app.
 */
const acked = new Set<string>();
// eslint-disable-next-line @typescript-eslint/no-require-imports
const amqpChannel = (require('amqplib/lib/channel_model') as { Channel: { prototype: { ack: AckFn } } }).Channel;
type AckFn = (this: unknown, message: { content: Buffer }, ...rest: unknown[]) => unknown;
const realAck = amqpChannel.prototype.ack;
amqpChannel.prototype.ack = function (this: unknown, message, ...rest) {
  try {
    acked.add((JSON.parse(message.content.toString()) as { data: { ref: string } }).data.ref);
  } catch {
    // not one of this suite's messages
  }
  return realAck.call(this, message, ...rest);
};
afterAll(() => {
  amqpChannel.prototype.ack = realAck;
});

@Controller()
class NoteConsumer {
  constructor(private readonly outbox: OutboxService) {}

  @EventPattern('Note')
  @Idempotent({ manualAck: true, retryAfter: 0 })
  async onNote(@Payload() data: { ref: string }) {
    seen.runs.set(data.ref, (seen.runs.get(data.ref) ?? 0) + 1);
    await this.outbox.manager.insert(Note, { ref: data.ref });
    if (seen.failOnce.delete(data.ref)) throw new Error('ledger unavailable'); // after the write: must roll back
  }
}

/** Keeps every warning the app logs. */
class RecordingLogger implements LoggerService {
  readonly warnings: string[] = [];
  log(): void {}
  error(): void {}
  debug(): void {}
  verbose(): void {}
  warn(message: unknown): void {
    this.warnings.push(String(message));
  }
}

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `@Idempotent({ manualAck: true }) and a message without an id (RabbitMQ noAck: false) on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication | undefined;
      let logger: RecordingLogger;
      let amqp: import('amqplib').ChannelModel;
      let channel: import('amqplib').Channel;
      const queue = uniqueQueue('outbox-noid');

      /** The consuming app: noAck false, prefetch 1 (a message left unsettled stops every later delivery). */
      const start = async (): Promise<DataSource> => {
        logger = new RecordingLogger();
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [NoteConsumer],
          imports: [(await import('@nestjs/typeorm')).TypeOrmModule.forFeature([Note])],
          client: rmqClientOptions(queue),
          outbox: { publisher: { enabled: false } },
        });
        app = moduleRef.createNestApplication({ logger });
        const rmq = rmqConsumerOptions(queue) as { options: Record<string, unknown> };
        app.connectMicroservice({ ...rmq, options: { ...rmq.options, prefetchCount: 1 } });
        await app.startAllMicroservices();
        await app.init();
        return app.get(DataSource);
      };

      /** Closes the app; once its consumer is gone, any delivery it left unsettled is back in the queue. */
      const stop = async (): Promise<{ messageCount: number; consumerCount: number }> => {
        await app?.close();
        app = undefined;
        await waitFor(async () => (await channel.checkQueue(queue)).consumerCount === 0, 'the consumer to leave');
        return channel.checkQueue(queue);
      };

      /** Publishes as another producer would, with raw amqplib: no messageId, no x-message-id header, no envelope. */
      const publish = (ref: string) =>
        channel.sendToQueue(queue, Buffer.from(JSON.stringify({ pattern: 'Note', data: { ref } })), {
          persistent: true,
        });

      const notes = (ds: DataSource, ref: string) => ds.getRepository(Note).countBy({ ref });
      const noIdWarnings = () =>
        logger.warnings.filter((w) => w.includes('NoteConsumer.onNote') && w.includes('without an id'));

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        amqp = await (require('amqplib') as typeof import('amqplib')).connect(RABBITMQ_URL);
        channel = await amqp.createChannel();
      });

      afterAll(async () => {
        await app?.close();
        await amqp?.close();
        await deleteQueue(queue);
        await db?.drop();
      });

      afterEach(async () => {
        await app?.close(); // a failed test leaves its app open
        app = undefined;
      });

      beforeEach(() => {
        seen.runs.clear();
        seen.failOnce.clear();
      });

      it('runs the handler in a transaction (outbox.manager works), commits, acks; warns once', async () => {
        const ds = await start();
        publish(`ok-1-${kind}`);
        publish(`ok-2-${kind}`);
        await waitFor(async () => (await notes(ds, `ok-2-${kind}`)) === 1, 'the second message to be applied');
        expect(await notes(ds, `ok-1-${kind}`)).toBe(1);
        expect(seen.runs.get(`ok-1-${kind}`)).toBe(1);
        expect(seen.runs.get(`ok-2-${kind}`)).toBe(1);
        // Without an id there is nothing to deduplicate by: no record.
        expect(await ds.getRepository(IdempotencyRecord).count()).toBe(0);
        expect(noIdWarnings()).toHaveLength(1);
        expect(noIdWarnings()[0]).toContain('transaction');
        await waitFor(() => acked.has(`ok-2-${kind}`), 'the second message to be acknowledged');
        // Both were acknowledged: with the consumer gone, nothing comes back to the queue.
        const after = await stop();
        expect(after).toMatchObject({ messageCount: 0, consumerCount: 0 });
      });

      it('a failing handler: its write rolls back, the message is requeued, the redelivery is applied', async () => {
        const ds = await start();
        const ref = `fails-once-${kind}`;
        seen.failOnce.add(ref);
        publish(ref);
        publish(`after-${kind}`); // with prefetch 1 it is delivered only once the failed one was settled
        await waitFor(async () => (await notes(ds, `after-${kind}`)) === 1, 'the message behind it to be applied');
        await waitFor(async () => (await notes(ds, ref)) === 1, 'the requeued message to be applied');
        expect(seen.runs.get(ref)).toBe(2);
        // The failed attempt's insert was rolled back: one row, from the second attempt.
        expect(await notes(ds, ref)).toBe(1);
        await waitFor(() => acked.has(ref) && acked.has(`after-${kind}`), 'both messages to be acknowledged');
        const after = await stop();
        expect(after).toMatchObject({ messageCount: 0, consumerCount: 0 });
        // Reopened: nothing is redelivered (a marker published now is the next and only delivery).
        const again = await start();
        publish(`marker-${kind}`);
        await waitFor(async () => (await notes(again, `marker-${kind}`)) === 1, 'the marker to be applied');
        expect([...seen.runs.keys()].sort()).toEqual([`after-${kind}`, ref, `marker-${kind}`].sort());
        expect(seen.runs.get(ref)).toBe(2);
        await waitFor(() => acked.has(`marker-${kind}`), 'the marker to be acknowledged');
        expect((await stop()).messageCount).toBe(0);
      });
    },
  );
}
