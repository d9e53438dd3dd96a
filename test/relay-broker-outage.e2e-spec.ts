import type { INestApplication } from '@nestjs/common';
import { RmqRecordSerializer } from '@nestjs/microservices/serializers/rmq-record.serializer';
import { DataSource } from 'typeorm';
import { OutboxDeadLetters, OutboxMessage, OutboxPublisher, OutboxService } from '../src';
import { OutboxDeadEvent, OutboxRetryEvent } from '../src/events/publisher-events';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { rmqClientOptions, uniqueQueue } from './helpers/consumers';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith, SERVICES } from './helpers/services';
import { TcpProxy } from './helpers/tcp-proxy';

/** A serializer bug for payloads marked `poison`: a failure of the message itself, which must still count. */
class PoisonSerializer extends RmqRecordSerializer {
  serialize(packet: any): any {
    const data = packet?.data?.data ?? packet?.data;
    if (data?.poison) throw new Error('serializer bug: cannot encode poison');
    return super.serialize(packet);
  }
}

const MAX_ATTEMPTS = 2;
const kinds: DatabaseKind[] = ['postgres', 'mariadb', 'sqlite'];

for (const kind of kinds) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `A RabbitMQ outage longer than maxAttempts × maxDelay on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let proxy: TcpProxy;
      let recorder: AmqpRecorder;
      const queue = uniqueQueue('outbox-broker-outage');
      const retries: OutboxRetryEvent[] = [];
      const dead: OutboxDeadEvent[] = [];

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        proxy = await new TcpProxy(SERVICES.rabbitmq.host, SERVICES.rabbitmq.port).start();
        recorder = await new AmqpRecorder(queue).start();
        const moduleRef = await createOutboxTestingModule({
          db,
          client: rmqClientOptions(queue, `amqp://guest:guest@127.0.0.1:${proxy.port}`, {
            serializer: new PoisonSerializer(),
            socketOptions: { reconnectTimeInSeconds: 0.2, heartbeatIntervalInSeconds: 1 },
          }),
          outbox: {
            publisher: { pollingInterval: 50, publishTimeout: 500 },
            retry: { maxAttempts: MAX_ATTEMPTS, initialDelay: 20, factor: 2, maxDelay: 100 },
          },
        });
        app = moduleRef.createNestApplication();
        app.useLogger(false);
        await app.init();
        app
          .get(OutboxPublisher)
          .on('retry', (e) => retries.push(e))
          .on('dead', (e) => dead.push(e));
      });

      afterAll(async () => {
        await app?.close();
        await proxy?.stop();
        await recorder?.stop();
        await db?.drop();
      });

      const rows = () =>
        app
          .get(DataSource)
          .getRepository(OutboxMessage)
          .find({ order: { seq: 'ASC' } });

      it('keeps messages pending with their attempts during the cut; then delivers all, none dead', async () => {
        const outbox = app.get(OutboxService);
        const first = await outbox.transaction(() => outbox.emit('OrderPlaced', { n: 0 }));
        await waitFor(() => recorder.distinct().has(first), 'a first message through the proxy');
        // The broker has it; wait for its row to be marked too, so the cut below finds no row of it in flight.
        await waitFor(async () => (await rows()).every((r) => r.status === 'sent'), 'the first row marked sent');

        proxy.cut();
        const ids: string[] = [];
        await outbox.transaction(async () => {
          for (let n = 1; n <= 4; n++) ids.push(await outbox.emit('OrderPlaced', { n }));
          for (const key of ['a', 'b'])
            for (let n = 1; n <= 3; n++) ids.push(await outbox.emit('OrderPlaced', { key, n }, { key }));
        });
        // Unkeyed messages and the head of each key are attempted; a key's followers wait behind their head.
        const attempted = new Set([...ids.slice(0, 4), ids[4], ids[7]]);
        const failuresOf = (id: string) => retries.filter((e) => e.messageId === id).length;
        // Each attempted message fails more than maxAttempts times (it would have been dead after MAX_ATTEMPTS).
        await waitFor(
          () => dead.length > 0 || [...attempted].every((id) => failuresOf(id) >= MAX_ATTEMPTS + 2),
          `${MAX_ATTEMPTS + 2} failed attempts of each message during the outage`,
          60_000,
        );
        expect(dead).toEqual([]);
        // Read the rows between two passes: a row the publisher holds right now has the attempt its claim counted
        // (given back by the failure's write), so a snapshot is taken when none of them is claimed.
        let during: OutboxMessage[] = [];
        await waitFor(async () => {
          during = (await rows()).filter((r) => ids.includes(r.messageId));
          return during.every((r) => r.claimedBy === null);
        }, 'a moment when no row is claimed');
        expect(during.map((r) => [r.status, r.attempts])).toEqual(ids.map(() => ['pending', 0]));
        for (const row of during.filter((r) => attempted.has(r.messageId)))
          expect(row.lastError).toEqual(expect.any(String));
        expect(
          retries.filter((e) => attempted.has(e.messageId)).every((e) => e.transportUnreachable && e.attempts === 0),
        ).toBe(true);
        const stats = await outbox.stats();
        expect(stats).toMatchObject({ pending: ids.length, dead: 0 });

        proxy.restore();
        await waitFor(
          () => ids.every((id) => recorder.distinct().has(id)),
          'every message delivered after the restore',
          60_000,
        );
        await waitFor(async () => (await rows()).every((r) => r.status === 'sent'), 'every row marked sent');
        expect(dead).toEqual([]);
        expect(await app.get(OutboxDeadLetters).count()).toBe(0);
        // Per-key order held through the outage.
        for (const key of ['a', 'b']) {
          const seen = recorder.messages.filter((m) => m.data?.key === key).map((m) => m.data.n);
          expect([...new Set(seen)]).toEqual([1, 2, 3]);
        }
      });

      it('still counts a failure of the message itself: it goes dead after maxAttempts', async () => {
        const outbox = app.get(OutboxService);
        const id = await outbox.transaction(() => outbox.emit('OrderPlaced', { poison: true }));
        await waitFor(() => dead.some((e) => e.messageId === id), 'the poison message to go dead');
        const row = await app.get(DataSource).getRepository(OutboxMessage).findOneByOrFail({ messageId: id });
        expect(row).toMatchObject({
          status: 'dead',
          attempts: MAX_ATTEMPTS,
          lastError: expect.stringContaining('cannot encode poison'),
        });
        expect(retries.filter((e) => e.messageId === id).map((e) => [e.attempts, e.transportUnreachable])).toEqual([
          [1, false],
        ]);
      });
    },
  );
}
