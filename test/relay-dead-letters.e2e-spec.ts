import type { INestApplication } from '@nestjs/common';
import { RmqRecordSerializer } from '@nestjs/microservices/serializers/rmq-record.serializer';
import { OutboxDeadLetters, OutboxNonRetryableError, OutboxPublisher, OutboxService } from '../src';
import { OutboxDeadEvent } from '../src/events/publisher-events';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { rmqClientOptions, uniqueQueue } from './helpers/consumers';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/**
 * A message the broker client cannot send (its serializer throws while `poisoned` holds — the kind of bug that is
 * fixed by a deploy) fails every attempt, goes dead after `maxAttempts`, and blocks only its own key; once the
 * cause is fixed, requeue publishes it, then the rest of its key, in order.
 */
class SwitchableSerializer extends RmqRecordSerializer {
  poisoned = true;
  serialize(packet: any): any {
    const data = packet?.data?.data ?? packet?.data;
    if (data?.fatal) throw new OutboxNonRetryableError('this payload can never be sent');
    if (data?.poison && this.poisoned) throw new Error('serializer bug: cannot encode poison');
    return super.serialize(packet);
  }
}

const kinds: DatabaseKind[] = ['postgres', 'mariadb', 'sqlite'];

for (const kind of kinds) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `Retries, dead letters and requeue on ${DATABASE_LABEL[kind]} → RabbitMQ`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let recorder: AmqpRecorder;
      const serializer = new SwitchableSerializer();
      const queue = uniqueQueue('outbox-dead');
      const dead: OutboxDeadEvent[] = [];

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        recorder = await new AmqpRecorder(queue).start();
        const moduleRef = await createOutboxTestingModule({
          db,
          client: rmqClientOptions(queue, undefined, { serializer }),
          outbox: { publisher: { pollingInterval: 50 }, retry: { maxAttempts: 3, initialDelay: 20, maxDelay: 60 } },
        });
        app = moduleRef.createNestApplication();
        app.useLogger(false);
        await app.init();
        app.get(OutboxPublisher).on('dead', (event) => dead.push(event));
      });

      afterAll(async () => {
        await app?.close();
        await recorder?.stop();
        await db?.drop();
      });

      const receivedIds = () => recorder.messages.map((m) => m.messageId);

      it('a poison head goes dead after maxAttempts, blocking only its key; requeue publishes it and its key in order', async () => {
        const outbox = app.get(OutboxService);
        const deadLetters = app.get(OutboxDeadLetters);
        const ids = await outbox.transaction(async () => ({
          poison: await outbox.emit('E', { poison: true }, { key: 'A' }),
          a2: await outbox.emit('E', { n: 'a2' }, { key: 'A' }),
          a3: await outbox.emit('E', { n: 'a3' }, { key: 'A' }),
          b1: await outbox.emit('E', { n: 'b1' }, { key: 'B' }),
          b2: await outbox.emit('E', { n: 'b2' }, { key: 'B' }),
          free: await outbox.emit('E', { n: 'free' }),
        }));

        await waitFor(() => dead.some((e) => e.messageId === ids.poison), 'the poison message to go dead');
        await waitFor(
          () => [ids.b1, ids.b2, ids.free].every((id) => receivedIds().includes(id)),
          'other keys and unkeyed messages',
        );
        expect(dead.find((e) => e.messageId === ids.poison)).toMatchObject({
          attempts: 3,
          key: 'A',
          error: expect.stringContaining('cannot encode poison'),
        });
        expect(receivedIds()).not.toContain(ids.poison);
        expect(receivedIds()).not.toContain(ids.a2);
        expect(receivedIds()).not.toContain(ids.a3);

        const stats = await outbox.stats();
        expect(stats).toMatchObject({ dead: 1, pending: 2, inFlight: 0 });
        expect(stats.oldestPendingAgeMs).toBeGreaterThanOrEqual(0);
        const listed = await deadLetters.list();
        expect(listed.map((m) => m.messageId)).toEqual([ids.poison]);
        expect(listed[0]).toMatchObject({
          status: 'dead',
          attempts: 3,
          lastError: expect.stringContaining('cannot encode poison'),
        });

        serializer.poisoned = false; // the fix is deployed
        expect(await deadLetters.requeue([ids.poison])).toBe(1);
        await waitFor(() => receivedIds().includes(ids.a3), 'the requeued message and the rest of its key');
        const keyA = recorder.messages
          .filter((m) => [ids.poison, ids.a2, ids.a3].includes(m.messageId))
          .map((m) => m.messageId);
        expect(keyA).toEqual([ids.poison, ids.a2, ids.a3]);
        await waitFor(async () => (await outbox.stats()).pending === 0, 'the rows to be marked sent');
        expect(await outbox.stats()).toMatchObject({ dead: 0, pending: 0, due: 0, inFlight: 0, oldestPendingAgeMs: 0 });
      });

      it('OutboxNonRetryableError marks a message dead at once; purge deletes it and unblocks its key', async () => {
        const outbox = app.get(OutboxService);
        const deadLetters = app.get(OutboxDeadLetters);
        const fatal = await outbox.transaction(() => outbox.emit('E', { fatal: true }, { key: 'C' }));
        const after = await outbox.transaction(() => outbox.emit('E', { n: 'c2' }, { key: 'C' }));
        await waitFor(() => dead.some((e) => e.messageId === fatal), 'the fatal message to go dead');
        expect(dead.find((e) => e.messageId === fatal)!.attempts).toBe(1);
        expect(await deadLetters.count()).toBe(1);
        expect(receivedIds()).not.toContain(after);

        await expect(deadLetters.requeue('nope' as never)).rejects.toThrow(/array of message ids/);
        expect(await deadLetters.purge()).toBe(1);
        await waitFor(() => receivedIds().includes(after), 'the next message of the key after the purge');
        expect(await deadLetters.list()).toEqual([]);
      });
    },
  );
}
