import {
  CallHandler,
  Controller,
  ExecutionContext,
  INestApplication,
  Injectable,
  NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import {
  ClientProxy,
  ClientProxyFactory,
  EventPattern,
  MessagePattern,
  Payload,
  Transport,
} from '@nestjs/microservices';
import { lastValueFrom, Observable } from 'rxjs';
import { Column, DataSource, Entity, PrimaryColumn } from 'typeorm';
import { IdempotencyKey, Idempotent, OutboxService } from '../src';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { deleteQueue, RABBITMQ_URL, rmqClientOptions, rmqConsumerOptions, uniqueQueue } from './helpers/consumers';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { freePort, waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

@Entity('test_balances')
class Balance {
  @PrimaryColumn({ type: 'varchar', length: 50 })
  id!: string;

  @Column({ type: 'int' })
  amount!: number;
}

@Entity('test_audit')
class AuditLine {
  @PrimaryColumn({ type: 'varchar', length: 100 })
  messageId!: string;

  @Column({ type: 'int' })
  amount!: number;
}

const seen = { deliveries: 0, runs: 0, failNext: 0, audits: 0, charges: 0 };

/** Counts every delivery, outside `@Idempotent()` (class interceptors run before method ones). */
@Injectable()
class CountDeliveries implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    seen.deliveries++;
    return next.handle();
  }
}

/** The classic consumer: adds each deposit to a balance. Not idempotent by itself. */
@Controller()
@UseInterceptors(CountDeliveries)
class BalanceConsumer {
  constructor(private readonly outbox: OutboxService) {}

  @EventPattern('Deposit')
  @Idempotent({ manualAck: true, retryAfter: 0 })
  async onDeposit(@Payload() data: { account: string; amount: number }) {
    seen.runs++;
    await this.outbox.manager.increment(Balance, { id: data.account }, 'amount', data.amount);
    if (seen.failNext > 0) {
      seen.failNext--;
      throw new Error('ledger unavailable'); // after the write: rolled back, requeued, applied on redelivery
    }
  }
}

/** A second handler of the same message: its own record, so it runs once too. */
@Controller()
class AuditConsumer {
  constructor(private readonly outbox: OutboxService) {}

  @EventPattern('Deposit')
  @Idempotent({ manualAck: false })
  async onDeposit(@Payload() data: { amount: number }, @IdempotencyKey() messageId: string) {
    seen.audits++;
    await this.outbox.manager.insert(AuditLine, { messageId, amount: data.amount });
  }
}

/** Request/response over TCP, keyed by a field of a foreign producer's message. */
@Controller()
class ChargeHandler {
  constructor(private readonly outbox: OutboxService) {}

  @MessagePattern('charge')
  @Idempotent({ key: (data: { requestId: string }) => data.requestId })
  async charge(@Payload() data: { requestId: string; amount: number }) {
    seen.charges++;
    await this.outbox.manager.increment(Balance, { id: 'charges' }, 'amount', data.amount);
    return { charged: data.amount, chargeNo: seen.charges };
  }
}

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `@Idempotent() message handlers (RabbitMQ noAck: false, TCP) on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let ds: DataSource;
      let amqp: import('amqplib').ChannelModel;
      let channel: import('amqplib').Channel;
      let tcpClient: ClientProxy;
      const queue = uniqueQueue('outbox-idem');

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [BalanceConsumer, AuditConsumer, ChargeHandler],
          imports: [(await import('@nestjs/typeorm')).TypeOrmModule.forFeature([Balance, AuditLine])],
          client: rmqClientOptions(queue),
          // A short wait for a pooled connection, so the saturated-pool test below is quick.
          outbox: { publisher: { enabled: false }, idempotency: { connectionTimeout: 1000 } },
        });
        app = moduleRef.createNestApplication({ logger: false });
        const port = await freePort();
        const rmq = rmqConsumerOptions(queue) as { options: Record<string, unknown> };
        // prefetchCount 1: a message left unacknowledged would stop every later delivery.
        app.connectMicroservice({ ...rmq, options: { ...rmq.options, prefetchCount: 1 } });
        app.connectMicroservice({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
        await app.startAllMicroservices();
        await app.init();
        ds = app.get(DataSource);
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        amqp = await (require('amqplib') as typeof import('amqplib')).connect(RABBITMQ_URL);
        channel = await amqp.createChannel();
        tcpClient = ClientProxyFactory.create({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
        await tcpClient.connect();
      });

      afterAll(async () => {
        await tcpClient?.close();
        await amqp?.close();
        await app?.close();
        await deleteQueue(queue);
        await db?.drop();
      });

      beforeEach(async () => {
        Object.assign(seen, { deliveries: 0, runs: 0, failNext: 0, audits: 0, charges: 0 });
        await ds.getRepository(Balance).save([
          { id: 'acct', amount: 100 },
          { id: 'charges', amount: 0 },
        ]);
        await ds.getRepository(IdempotencyRecord).clear();
        await ds.getRepository(AuditLine).clear();
      });

      /** Publishes like a producer whose relay crashed after publishing and published again: same messageId. */
      const publish = (messageId: string, data: object) =>
        channel.sendToQueue(queue, Buffer.from(JSON.stringify({ pattern: 'Deposit', data })), {
          messageId,
          persistent: true,
        });
      const balance = async (id = 'acct') => (await ds.getRepository(Balance).findOneByOrFail({ id })).amount;
      const queued = async () => (await channel.checkQueue(queue)).messageCount;

      it('the balance example: 100 + msg-7 (25) + msg-7 again + msg-8 (10) = 135; msg-7 applied once; two records', async () => {
        publish('msg-7', { account: 'acct', amount: 25 });
        publish('msg-7', { account: 'acct', amount: 25 });
        publish('msg-8', { account: 'acct', amount: 10 });
        await waitFor(() => seen.deliveries === 3, 'three deliveries to BalanceConsumer');
        await waitFor(
          async () => (await ds.getRepository(IdempotencyRecord).countBy({ scope: 'BalanceConsumer.onDeposit' })) === 2,
          'two records',
        );
        expect(await balance()).toBe(135);
        expect(seen.runs).toBe(2);
        const records = await ds
          .getRepository(IdempotencyRecord)
          .find({ where: { scope: 'BalanceConsumer.onDeposit' }, order: { key: 'ASC' } });
        expect(records.map((r) => r.key)).toEqual(['msg-7', 'msg-8']);
        // The audit handler of the same messages has its own records: it also ran once per message.
        await waitFor(async () => (await ds.getRepository(AuditLine).count()) === 2, 'two audit lines');
        expect(seen.audits).toBe(2);
        expect(await ds.getRepository(IdempotencyRecord).countBy({ scope: 'AuditConsumer.onDeposit' })).toBe(2);
        // With prefetchCount 1, msg-8 is delivered only after the skipped duplicate was acknowledged (manualAck).
        expect(await queued()).toBe(0);
      });

      it('a handler error rolls everything back (record included) and requeues; the redelivery is applied once', async () => {
        seen.failNext = 1;
        publish('msg-9', { account: 'acct', amount: 40 });
        await waitFor(
          async () =>
            (await ds
              .getRepository(IdempotencyRecord)
              .countBy({ scope: 'BalanceConsumer.onDeposit', key: 'msg-9' })) === 1,
          'msg-9 to be applied',
        );
        expect(seen.runs).toBe(2);
        expect(await balance()).toBe(140);
        publish('msg-9', { account: 'acct', amount: 40 });
        await waitFor(() => seen.deliveries === 3, 'the duplicate to be delivered');
        publish('msg-10', { account: 'acct', amount: 1 });
        await waitFor(() => seen.deliveries === 4, 'msg-10 to be delivered after the duplicate was acked');
        await waitFor(async () => (await balance()) === 141, 'msg-10 to be applied');
        expect(seen.runs).toBe(3);
      });

      it('zero configuration with this library on both sides: an outbox event published again with its id is applied once', async () => {
        const outbox = app.get(OutboxService);
        const id = await outbox.transaction(() => outbox.emit('Deposit', { account: 'acct', amount: 5 }));
        expect(await outbox.flush()).toBe(1);
        await waitFor(
          async () =>
            (await ds.getRepository(IdempotencyRecord).countBy({ scope: 'BalanceConsumer.onDeposit', key: id })) === 1,
          'the event to be applied',
        );
        // The relay crashed after publishing and before marking the row sent: the same message goes out again.
        publish(id, { account: 'acct', amount: 5 });
        publish('msg-after', { account: 'acct', amount: 1 });
        await waitFor(async () => (await balance()) === 106, 'msg-after to be applied');
        expect(seen.runs).toBe(2);
        expect(seen.deliveries).toBe(3);
      });

      it('@MessagePattern: a duplicate request gets the stored response without running the handler (custom key)', async () => {
        const first = await lastValueFrom(tcpClient.send('charge', { requestId: `r-${kind}`, amount: 5 }));
        const again = await lastValueFrom(tcpClient.send('charge', { requestId: `r-${kind}`, amount: 5 }));
        expect(first).toEqual({ charged: 5, chargeNo: 1 });
        expect(again).toEqual(first);
        expect(seen.charges).toBe(1);
        expect(await balance('charges')).toBe(5);
        const other = await lastValueFrom(tcpClient.send('charge', { requestId: `r2-${kind}`, amount: 5 }));
        expect(other).toEqual({ charged: 5, chargeNo: 2 });
        expect(await balance('charges')).toBe(10);
      });

      if (kind !== 'sqlite')
        it('a message whose key cannot be taken (no pooled connection in time) is requeued, then applied once', async () => {
          // Hold every connection of the pool: the last runner's connect waits (it gets one when the others go).
          const held: import('typeorm').QueryRunner[] = [];
          let waiting: Promise<unknown> | undefined;
          while (!waiting) {
            const runner = ds.createQueryRunner();
            const connecting = runner.connect();
            const connected = await Promise.race([
              connecting.then(() => true),
              new Promise<false>((resolve) => setTimeout(() => resolve(false), 500)),
            ]);
            if (connected) held.push(runner);
            else waiting = connecting.then(() => runner.release());
          }
          try {
            publish('msg-busy', { account: 'acct', amount: 7 });
            // Each delivery waits connectionTimeout, then goes back to the queue (prefetchCount 1: an unsettled one
            // would be the last delivery of the queue).
            await waitFor(() => seen.deliveries >= 3, 'the message to be requeued and delivered again', 20_000);
            expect(seen.runs).toBe(0);
          } finally {
            await Promise.all(held.map((runner) => runner.release()));
            await waiting;
          }
          await waitFor(async () => (await balance()) === 107, 'msg-busy to be applied');
          expect(seen.runs).toBe(1);
          expect(
            await ds.getRepository(IdempotencyRecord).countBy({ scope: 'BalanceConsumer.onDeposit', key: 'msg-busy' }),
          ).toBe(1);
        });
    },
  );
}
