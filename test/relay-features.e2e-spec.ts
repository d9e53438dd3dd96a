import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  OutboxCleanupRegistry,
  OutboxCleanupScheduler,
  OutboxMessage,
  OutboxModuleOptions,
  OutboxService,
} from '../src';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { rmqClientOptions, uniqueQueue } from './helpers/consumers';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { E2eFixture, useTestDatabase } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

function startApp(
  fx: E2eFixture,
  queue: string,
  outbox: Omit<OutboxModuleOptions, 'client'>,
): Promise<INestApplication> {
  return fx.start({ client: rmqClientOptions(queue), outbox, logger: false });
}

describeWith(
  ['postgres', 'rabbitmq'],
  `Wake-up across replicas with LISTEN/NOTIFY on ${DATABASE_LABEL.postgres}`,
  () => {
    const fx = useTestDatabase('postgres');
    let writer: INestApplication;
    let recorder: AmqpRecorder;
    const queue = uniqueQueue('outbox-notify');

    beforeAll(async () => {
      recorder = await new AmqpRecorder(queue).start();
      fx.defer(() => recorder.stop());
      writer = await startApp(fx, queue, { publisher: { enabled: false } });
      // Polls only once a minute: within this test only a notification can wake it.
      await startApp(fx, queue, { publisher: { pollingInterval: 60_000 } });
    });

    it("a commit in one process wakes another process's publisher long before its next poll", async () => {
      const ds = writer.get(DataSource);
      await waitFor(
        async () =>
          Number(
            (
              await ds.query(
                `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'nestjs-outbox-listener'`,
              )
            )[0].n,
          ) === 1,
        'the publisher to LISTEN',
      );
      const outbox = writer.get(OutboxService);
      const id = await outbox.transaction(() => outbox.emit('E', { n: 1 }));
      await waitFor(() => recorder.distinct().has(id), 'the other replica to publish the message', 15_000);
    });
  },
);

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith([...servicesOf(kind), 'rabbitmq'], `Delayed messages and cleanup on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useTestDatabase(kind);
    let recorder: AmqpRecorder;
    const queue = uniqueQueue('outbox-features');

    beforeAll(async () => {
      recorder = await new AmqpRecorder(queue).start();
      fx.defer(() => recorder.stop());
    });

    it('publishes a delayed message (delay / availableAt) only once it is due on the database clock', async () => {
      const app = await startApp(fx, queue, { publisher: { pollingInterval: 50 } });
      try {
        const outbox = app.get(OutboxService);
        const [byDelay, byDate, now] = await outbox.transaction(async () => [
          await outbox.emit('E', { n: 'delay' }, { delay: 1500 }),
          await outbox.emit('E', { n: 'date' }, { availableAt: new Date(Date.now() + 1500) }),
          await outbox.emit('E', { n: 'now' }),
        ]);
        await waitFor(() => recorder.distinct().has(now), 'the undelayed message');
        expect(recorder.distinct().has(byDelay)).toBe(false);
        expect(recorder.distinct().has(byDate)).toBe(false);
        await waitFor(
          () => recorder.distinct().has(byDelay) && recorder.distinct().has(byDate),
          'the delayed messages',
        );
        const repo = app.get(DataSource).getRepository(OutboxMessage);
        await waitFor(async () => (await repo.countBy({ status: 'pending' })) === 0, 'every row sent');
        const delayed = await repo.findOneByOrFail({ messageId: byDelay });
        expect(delayed.sentAt!.getTime() - delayed.createdAt.getTime()).toBeGreaterThanOrEqual(1500);
      } finally {
        await app.close();
      }
    });

    it('the scheduled cleanup deletes sent rows past retention in batches, keeps pending and dead rows, and runs registered tasks', async () => {
      const app = await startApp(fx, queue, {
        publisher: { pollingInterval: 50 },
        cleanup: { retention: 60_000, batchSize: 2, enabled: false },
      });
      try {
        const outbox = app.get(OutboxService);
        const ds = app.get(DataSource);
        const repo = ds.getRepository(OutboxMessage);
        await repo.createQueryBuilder().delete().execute();
        const ids = await outbox.transaction(async () =>
          Promise.all([1, 2, 3, 4, 5].map((n) => outbox.emit('E', { n }))),
        );
        await waitFor(async () => (await repo.countBy({ status: 'sent' })) === 5, 'five sent rows');
        await outbox.transaction(() => outbox.emit('Later', {}, { delay: 3_600_000 }));
        await repo.update({ messageId: ids[0] }, { status: 'dead', sentAt: null });

        const batches: number[] = [];
        app.get(OutboxCleanupRegistry).register({
          name: 'test:records',
          deleteBatch: async (limit) => (batches.push(limit), batches.length < 3 ? limit : 1),
        });
        const cleanup = app.get(OutboxCleanupScheduler);
        expect(await cleanup.runOnce()).toMatchObject({ 'outbox:sent-rows': 0, 'test:records': 5 });
        expect(batches).toEqual([2, 2, 2]);
        // An hour later (the rows aged past the retention):
        await repo.update({ status: 'sent' }, { sentAt: new Date(Date.now() - 3_600_000) });
        expect((await cleanup.runOnce())['outbox:sent-rows']).toBe(4);
        expect(await repo.countBy({ status: 'sent' })).toBe(0);
        expect(await repo.countBy({ status: 'dead' })).toBe(1);
        expect(await repo.countBy({ status: 'pending' })).toBe(1);
      } finally {
        await app.close();
      }
    });

    it('with cleanup.deleteOnPublish, a published row is deleted instead of marked sent', async () => {
      const app = await startApp(fx, queue, { publisher: { pollingInterval: 50 }, cleanup: { deleteOnPublish: true } });
      try {
        const outbox = app.get(OutboxService);
        const repo = app.get(DataSource).getRepository(OutboxMessage);
        await repo.createQueryBuilder().delete().execute();
        const id = await outbox.transaction(() => outbox.emit('E', { n: 'gone' }));
        await waitFor(() => recorder.distinct().has(id), 'the message at the consumer');
        await waitFor(async () => (await repo.countBy({ messageId: id })) === 0, 'the row to be deleted');
      } finally {
        await app.close();
      }
    });
  });
}
