import { Body, Controller, INestApplication, LoggerService, Post } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { Column, DataSource, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { getOutboxMessageId, Idempotent, OutboxService } from '../src';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { TestOrder } from './fixtures/order.entity';
import { deleteQueue, RABBITMQ_URL, rmqClientOptions, rmqConsumerOptions, uniqueQueue } from './helpers/consumers';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/*
 * The quick start's consumer under a burst: 200 messages on a RabbitMQ queue whose consumer has no prefetch limit
 * (Nest's default, prefetchCount 0: the broker pushes the whole queue at once), each handler inserting an effect
 * row, adding to one hot row and, in the same transaction, writing its dedup record. The messages come straight to
 * the queue, from 200 concurrent outbox transactions through the relay, and from 200 concurrent POST /orders under
 * `@Idempotent()` (the quick start's path: HTTP records, orders, outbox rows and the consumer's records all written
 * at once). On MariaDB a trial of #26 logged hundreds of "Deadlock found when trying to get lock" errors this way
 * (each message requeued until it went through): the test asserts none is logged, every message is applied exactly
 * once, and nothing is left on the queue, ready or unacknowledged.
 */

@Entity('test_burst_effects')
class Effect {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 100 })
  messageId!: string;

  @Column({ type: 'int' })
  amount!: number;
}

/** One row every handler updates (the quick start's revenue total): the hot row of the burst. */
@Entity('test_burst_totals')
class Total {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'int', default: 0 })
  total!: number;
}

@Controller()
class BurstConsumer {
  constructor(private readonly outbox: OutboxService) {}

  @EventPattern('OrderPlaced')
  @Idempotent() // manualAck derived: the consumer runs with noAck: false
  async onOrderPlaced(@Payload() event: { n: number; amount: number }, @Ctx() context: unknown) {
    const messageId = getOutboxMessageId(event, context) ?? 'none';
    await this.outbox.manager.insert(Effect, { messageId, amount: event.amount });
    await this.outbox.manager.increment(Total, { id: 1 }, 'total', event.amount);
  }
}

/** The quick start's producer: POST /orders writes the order and its event with the request's key. */
@Controller('orders')
class OrdersController {
  constructor(private readonly outbox: OutboxService) {}

  @Post()
  @Idempotent({ scope: () => 'shop' })
  async place(@Body() dto: { n: number; amount: number }) {
    await this.outbox.manager.insert(TestOrder, { reference: `order-${dto.n}`, amount: dto.amount });
    await this.outbox.emit('OrderPlaced', dto, { key: `order-${dto.n}` });
    return { placed: dto.n };
  }
}

/** Keeps every error and warning line, to count the deadlocks reported. */
class RecordingLogger implements LoggerService {
  readonly lines: string[] = [];
  log() {}
  debug() {}
  verbose() {}
  warn(message: unknown, ...rest: unknown[]) {
    this.lines.push([message, ...rest].map(String).join(' '));
  }
  error(message: unknown, ...rest: unknown[]) {
    this.lines.push([message, ...rest].map(String).join(' '));
  }
}

const kinds: DatabaseKind[] = ['mariadb', 'postgres'];

for (const kind of kinds) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `a burst of 200 messages on a consumer without a prefetch limit on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let ds: DataSource;
      let amqp: import('amqplib').ChannelModel;
      let channel: import('amqplib').Channel;
      const logger = new RecordingLogger();
      const queue = uniqueQueue('outbox-burst');
      const consumer = 'BurstConsumer.onOrderPlaced'; // the scope of the consumer's records

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [BurstConsumer, OrdersController],
          imports: [(await import('@nestjs/typeorm')).TypeOrmModule.forFeature([Effect, Total])],
          client: rmqClientOptions(queue),
          outbox: { publisher: { pollingInterval: 50 } },
        });
        app = moduleRef.createNestApplication({ logger });
        const rmq = rmqConsumerOptions(queue) as { options: Record<string, unknown> };
        const { prefetchCount: _limit, ...unlimited } = rmq.options;
        app.connectMicroservice({ ...rmq, options: unlimited });
        await app.listen(0, '127.0.0.1');
        await app.startAllMicroservices();
        ds = app.get(DataSource);
        await ds.getRepository(Total).insert({ total: 0 });
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        amqp = await (require('amqplib') as typeof import('amqplib')).connect(RABBITMQ_URL);
        channel = await amqp.createChannel();
      }, 60_000);

      afterAll(async () => {
        await amqp?.close();
        await app?.close();
        await deleteQueue(queue);
        await db?.drop();
      });

      // Straight to the queue (a burst the consumer gets at once), then through the outbox as the quick start sends
      // them: 200 orders emitted concurrently, published by the relay while the consumer applies them.
      it.each(['queue', 'outbox', 'http'])(
        'applies each of 200 messages sent to the %s once, logs no deadlock, and leaves the queue empty (0 ready, 0 unacked)',
        async (via) => {
          logger.lines.length = 0;
          await ds.getRepository(Effect).clear();
          await ds.getRepository(IdempotencyRecord).clear();
          await ds.getRepository(Total).update({ id: 1 }, { total: 0 });
          const ids = Array.from({ length: 200 }, (_, n) => `burst-${kind}-${n}-${Date.now().toString(36)}`);
          if (via === 'outbox') {
            const outbox = app.get(OutboxService);
            await Promise.all(
              ids.map((messageId, n) =>
                outbox.transaction(async () => {
                  await outbox.emit('OrderPlaced', { n, amount: 1 }, { key: `order-${n}` });
                }),
              ),
            );
          } else if (via === 'http') {
            // 200 POST /orders at once, each with its Idempotency-Key: order, event and key commit together.
            const url = await app.getUrl();
            const responses = await Promise.all(
              ids.map((key, n) =>
                fetch(`${url}/orders`, {
                  method: 'POST',
                  headers: { 'content-type': 'application/json', 'idempotency-key': key },
                  body: JSON.stringify({ n, amount: 1 }),
                }),
              ),
            );
            expect(responses.map((r) => r.status)).toEqual(ids.map(() => 201));
          } else
            ids.forEach((messageId, n) =>
              channel.sendToQueue(
                queue,
                Buffer.from(JSON.stringify({ pattern: 'OrderPlaced', data: { n, amount: 1 } })),
                {
                  messageId,
                  persistent: true,
                },
              ),
            );
          await waitFor(
            async () => (await ds.getRepository(IdempotencyRecord).countBy({ scope: consumer })) >= ids.length,
            'the 200 messages to be applied',
            60_000,
          );
          const effects = await ds.getRepository(Effect).find();
          if (via === 'queue') expect(effects.map((e) => e.messageId).sort()).toEqual([...ids].sort());
          // Each applied once: as many distinct messages as effects.
          expect(new Set(effects.map((e) => e.messageId)).size).toBe(200);
          expect(effects).toHaveLength(200);
          expect((await ds.getRepository(Total).findOneByOrFail({ id: 1 })).total).toBe(200);
          const deadlocks = logger.lines.filter((line) => /deadlock|lock wait/i.test(line));
          expect(deadlocks).toEqual([]);
          // Nothing ready (nothing requeued and left over); the next test checks nothing is unacked.
          await waitFor(
            async () => (await channel.checkQueue(queue)).messageCount === 0,
            'the queue to be drained',
            10_000,
          );
          const { messageCount } = await channel.checkQueue(queue);
          expect(messageCount).toBe(0);
        },
        90_000,
      );

      it('left no message unacknowledged: closing the consumer returns none to the queue', async () => {
        await app.close();
        await new Promise((r) => setTimeout(r, 200));
        expect((await channel.checkQueue(queue)).messageCount).toBe(0);
      });
    },
  );
}
