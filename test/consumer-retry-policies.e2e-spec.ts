import { Controller, INestApplication } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { DataSource } from 'typeorm';
import { getOutboxMessageId, Idempotent, type IdempotentOptions, OutboxDeadLetters } from '../src';
import type { OutboxRetryMessage } from '../src/retry.options';
import { OutboxMessage } from '../src/schema/outbox-message.entity';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { deleteQueue, RABBITMQ_URL, rmqConsumerOptions, uniqueQueue } from './helpers/consumers';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/*
 * Broker consumers under @Idempotent({ retry }) take the policy of their @EventPattern's pattern and ask retryIf —
 * at the broker's delivery (attempt 1) and at each re-run from the inbox row. Real RabbitMQ, prefetch 1.
 */

interface Message {
  /** `type`: a TypeError (retryIf refuses it at once); `stop`: retryIf refuses from attempt 3 on. */
  fail: 'always' | 'type' | 'stop';
}

const runs = new Map<string, number>();
const asked: Array<{ id: string; attempt: number; name: string; message: OutboxRetryMessage }> = [];

/** A consumer's retry options, as `@Idempotent({ retry })` takes them (the type users reach it by). */
const RETRY: Exclude<NonNullable<IdempotentOptions['retry']>, boolean> = {
  maxAttempts: 5,
  initialDelay: 20,
  factor: 1,
  maxDelay: 50,
  jitter: 0,
  retryIf: (error, attempt, message) => {
    asked.push({ id: message.messageId, attempt, name: (error as Error).name, message });
    if (error instanceof TypeError) return false;
    return !((message.payload as Message).fail === 'stop' && attempt >= 3);
  },
  patterns: { 'audit.*': { maxAttempts: 2 } },
};

function fail(data: Message, context: unknown): never {
  const id = getOutboxMessageId(data, context) ?? 'none';
  runs.set(id, (runs.get(id) ?? 0) + 1);
  if (data.fail === 'type') throw new TypeError('bad shape');
  throw new Error(`cannot apply ${id}`);
}

@Controller()
class PolicyConsumers {
  @EventPattern('audit.recorded')
  @Idempotent({ manualAck: true, retryAfter: 0, retry: RETRY })
  onAudit(@Payload() data: Message, @Ctx() context: unknown) {
    fail(data, context);
  }

  @EventPattern('orders.recorded')
  @Idempotent({ manualAck: true, retryAfter: 0, retry: RETRY })
  onOrder(@Payload() data: Message, @Ctx() context: unknown) {
    fail(data, context);
  }
}

const kinds: DatabaseKind[] = ['postgres', 'mariadb', 'sqlite'];

for (const kind of kinds) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `Consumer retry policies per pattern on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let amqp: import('amqplib').ChannelModel;
      let channel: import('amqplib').Channel;
      const queue = uniqueQueue('outbox-consumer-policies');
      const run = `${kind}-${Date.now().toString(36)}`;

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [PolicyConsumers],
          outbox: { client: undefined, publisher: { pollingInterval: 50 } },
        });
        app = moduleRef.createNestApplication({ logger: false });
        const rmq = rmqConsumerOptions(queue) as { options: Record<string, unknown> };
        app.connectMicroservice({ ...rmq, options: { ...rmq.options, prefetchCount: 1 } });
        await app.startAllMicroservices();
        await app.init();
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

      it('audit.* dead after 2 runs, others after 5; retryIf false dead at once or from the attempt it says', async () => {
        const ids = {
          audit: `${run}-audit`,
          order: `${run}-order`,
          type: `${run}-type`,
          stop: `${run}-stop`,
        };
        const publish = (messageId: string, pattern: string, data: Message) =>
          channel.sendToQueue(queue, Buffer.from(JSON.stringify({ pattern, data })), { messageId, persistent: true });
        publish(ids.audit, 'audit.recorded', { fail: 'always' });
        publish(ids.order, 'orders.recorded', { fail: 'always' });
        publish(ids.type, 'orders.recorded', { fail: 'type' });
        publish(ids.stop, 'orders.recorded', { fail: 'stop' });
        const rows = app.get(DataSource).getRepository(OutboxMessage);
        await waitFor(
          async () => (await rows.find()).filter((r) => r.status === 'dead').length === 4,
          'the four messages to be dead letters',
          60_000,
        );
        const byId = new Map((await rows.find()).map((r) => [r.messageId, r]));
        const attempts = Object.fromEntries(Object.entries(ids).map(([k, id]) => [k, byId.get(id)?.attempts]));
        expect(attempts).toEqual({ audit: 2, order: 5, type: 1, stop: 3 });
        expect(Object.fromEntries(Object.entries(ids).map(([k, id]) => [k, runs.get(id)]))).toEqual({
          audit: 2,
          order: 5,
          type: 1,
          stop: 3,
        });
        // retryIf got the consumer's own error, the attempt (1 = the broker's delivery) and the message.
        expect(asked.filter((a) => a.id === ids.type).map((a) => [a.attempt, a.name])).toEqual([[1, 'TypeError']]);
        expect(asked.filter((a) => a.id === ids.stop).map((a) => a.attempt)).toEqual([1, 2, 3]);
        const [first] = asked.filter((a) => a.id === ids.stop);
        expect(first.message).toMatchObject({ pattern: 'orders.recorded', payload: { fail: 'stop' } });
        const relayed = asked.filter((a) => a.id === ids.stop)[2];
        expect(relayed.message).toMatchObject({
          pattern: 'orders.recorded',
          payload: { fail: 'stop' },
          destination: 'consumer:PolicyConsumers.onOrder',
        });
        const letter = await app.get(OutboxDeadLetters).get(ids.audit);
        expect(letter?.history.map((h) => h.attempt)).toEqual([1, 2]);
      });
    },
  );
}
