import { Controller, INestApplication, Type } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { Column, DataSource, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { getOutboxMessageId, Idempotent, OutboxConfigurationError, OutboxService } from '../src';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { deleteQueue, RABBITMQ_URL, uniqueQueue } from './helpers/consumers';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/*
 * The ack mode of a RabbitMQ consumer is known when the app boots: `manualAck` is derived from the consumer's
 * `noAck` when left out, and a `manualAck` that contradicts it fails start-up with an OUTBOX_ACK_MODE error that
 * names both settings and the fix (before: an ack on a noAck: true channel closed it and lost the messages in
 * flight; a noAck: false consumer nobody acked kept its messages unacknowledged).
 */

@Entity('test_ack_mode_effects')
class Effect {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 100 })
  messageId!: string;
}

async function apply(outbox: OutboxService, data: unknown, context: unknown): Promise<void> {
  await outbox.manager.insert(Effect, { messageId: getOutboxMessageId(data, context) ?? 'none' });
}

/** `manualAck` left out: derived from the consumer. */
@Controller()
class DerivedConsumer {
  constructor(private readonly outbox: OutboxService) {}

  @EventPattern('Applied')
  @Idempotent()
  onApplied(@Payload() data: unknown, @Ctx() context: unknown) {
    return apply(this.outbox, data, context);
  }
}

@Controller()
class ManualAckConsumer {
  @EventPattern('Applied')
  @Idempotent({ manualAck: true })
  onApplied() {}
}

@Controller()
class NoManualAckConsumer {
  @EventPattern('Applied')
  @Idempotent({ manualAck: false })
  onApplied() {}
}

/** A second handler of 'Applied', with no say about which of the two acks. */
@Controller()
class SecondConsumer {
  @EventPattern('Applied')
  @Idempotent()
  onApplied() {}
}

const kinds: DatabaseKind[] = ['postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `the ack mode of RabbitMQ consumers on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      const queues: string[] = [];
      beforeAll(async () => {
        db = await createTestDatabase(kind);
      });
      afterAll(async () => {
        for (const queue of queues) await deleteQueue(queue);
        await db?.drop();
      });

      /** An app whose `controllers` consume a fresh queue with `consumer` options (Nest's defaults where left out). */
      async function createApp(controllers: Type<unknown>[], consumer: Record<string, unknown>) {
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers,
          imports: [(await import('@nestjs/typeorm')).TypeOrmModule.forFeature([Effect])],
          outbox: { client: undefined, publisher: { enabled: false }, cleanup: { enabled: false } },
        });
        const app = moduleRef.createNestApplication({ logger: false });
        const queue = uniqueQueue('outbox-ack-mode');
        queues.push(queue);
        app.connectMicroservice({
          transport: 5, // Transport.RMQ
          options: { urls: [RABBITMQ_URL], queue, queueOptions: { durable: true }, ...consumer },
        });
        return { app, queue };
      }

      /** The error `app.init()` fails with (undefined when the app boots). */
      async function bootError(controllers: Type<unknown>[], consumer: Record<string, unknown>): Promise<unknown> {
        const { app } = await createApp(controllers, consumer);
        try {
          await app.init();
          return undefined;
        } catch (error) {
          return error;
        } finally {
          await app.close().catch(() => undefined);
        }
      }

      it("refuses manualAck: true on a consumer started with Nest's default noAck (true), naming both settings and the fix", async () => {
        const error = await bootError([ManualAckConsumer], {});
        expect(error).toBeInstanceOf(OutboxConfigurationError);
        expect(error).toMatchObject({ name: 'OutboxAckModeError', code: 'OUTBOX_ACK_MODE' });
        const message = (error as Error).message;
        expect(message).toMatch(/ManualAckConsumer\.onApplied sets manualAck: true/);
        expect(message).toMatch(/queue 'outbox-ack-mode-[^']+' runs with noAck: true/);
        expect(message).toMatch(/PRECONDITION_FAILED/);
        expect(message).toMatch(/Fix: start the consumer with noAck: false .* or leave manualAck out/);
      });

      it('refuses it in a standalone microservice too: listen() fails before the consumer connects', async () => {
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [ManualAckConsumer],
          outbox: { client: undefined, publisher: { enabled: false }, cleanup: { enabled: false } },
        });
        const queue = uniqueQueue('outbox-ack-mode');
        queues.push(queue);
        const microservice = moduleRef.createNestMicroservice({
          transport: 5, // Transport.RMQ, Nest's default noAck (true)
          options: { urls: [RABBITMQ_URL], queue, queueOptions: { durable: true } },
          logger: false,
        } as never);
        try {
          await expect(microservice.listen()).rejects.toMatchObject({
            code: 'OUTBOX_ACK_MODE',
            message: expect.stringMatching(/ManualAckConsumer\.onApplied sets manualAck: true, but .*noAck: true/),
          });
        } finally {
          await microservice.close().catch(() => undefined);
        }
      });

      it('refuses manualAck: false on a noAck: false consumer no other handler acks for', async () => {
        const error = await bootError([NoManualAckConsumer], { noAck: false });
        expect(error).toMatchObject({ code: 'OUTBOX_ACK_MODE' });
        expect((error as Error).message).toMatch(
          /NoManualAckConsumer\.onApplied sets manualAck: false, but .* runs with noAck: false .*stay unacknowledged.*Fix: leave manualAck out/,
        );
      });

      it('refuses a pattern two handlers share on a noAck: false consumer when neither is chosen to ack', async () => {
        const error = await bootError([DerivedConsumer, SecondConsumer], { noAck: false });
        expect(error).toMatchObject({ code: 'OUTBOX_ACK_MODE' });
        expect((error as Error).message).toMatch(
          /shares its pattern with another handler .*exactly once.*manualAck: true on the one handler that acks/,
        );
      });

      it('boots a shared pattern whose handlers say which one acks', async () => {
        // ManualAckConsumer acks, NoManualAckConsumer (false) leaves it to it.
        expect(await bootError([ManualAckConsumer, NoManualAckConsumer], { noAck: false })).toBeUndefined();
      });

      describe.each([
        ['noAck: false, prefetch 1', { noAck: false, prefetchCount: 1 }],
        ["Nest's default noAck (true)", {}],
      ])('manualAck derived on a consumer with %s', (_label, consumer) => {
        let app: INestApplication;
        let queue: string;
        let ds: DataSource;
        let amqp: import('amqplib').ChannelModel;
        let channel: import('amqplib').Channel;

        beforeAll(async () => {
          ({ app, queue } = await createApp([DerivedConsumer], consumer));
          await app.init();
          await app.startAllMicroservices();
          ds = app.get(DataSource);
          await ds.getRepository(Effect).clear();
          // eslint-disable-next-line @typescript-eslint/no-require-imports
          amqp = await (require('amqplib') as typeof import('amqplib')).connect(RABBITMQ_URL);
          channel = await amqp.createChannel();
        });
        afterAll(async () => {
          await amqp?.close();
          await app?.close();
        });

        it('settles every message as the consumer expects: each applied once, none lost, the queue ends with 0 ready and 0 unacked', async () => {
          const run = `${kind}-${Date.now().toString(36)}`;
          const ids = Array.from({ length: 20 }, (_, n) => `${run}-${n}`);
          const publish = (messageId: string) =>
            channel.sendToQueue(queue, Buffer.from(JSON.stringify({ pattern: 'Applied', data: { messageId } })), {
              messageId,
              persistent: true,
            });
          // Each message twice (a redelivery of the same message id): the duplicate is skipped, and acked with
          // noAck: false — with prefetch 1 an unacknowledged message would hold back every later one.
          for (const id of ids) {
            publish(id);
            publish(id);
          }
          await waitFor(async () => (await ds.getRepository(Effect).count()) >= ids.length, 'the 20 messages', 30_000);
          // The channel is still open (an ack on a noAck channel would have closed it): later messages flow too.
          const late = `${run}-late`;
          publish(late);
          await waitFor(async () => (await ds.getRepository(Effect).countBy({ messageId: late })) === 1, 'a later one');
          const effects = await ds.getRepository(Effect).find();
          expect(effects.map((e) => e.messageId).sort()).toEqual([...ids, late].sort());
          await waitFor(async () => (await channel.checkQueue(queue)).messageCount === 0, 'no message ready');
          // Closing the consumer returns any unacknowledged message to the queue: none comes back.
          await app.close();
          await new Promise((r) => setTimeout(r, 200));
          const { messageCount, consumerCount } = await channel.checkQueue(queue);
          expect({ messageCount, consumerCount }).toEqual({ messageCount: 0, consumerCount: 0 });
        }, 60_000);
      });
    },
  );
}
