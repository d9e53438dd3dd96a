/**
 * Found by fault 1 on SQLite: a process whose job is to publish (a Nest application context with OutboxModule, no
 * HTTP server) exited with code 0 right after bootstrap when nothing was due, because OutboxPublisher's polling timer
 * was `unref()`ed and with SQLite no socket holds the event loop (the broker client connects lazily, on the first
 * publish). Like an @nestjs/schedule interval, the publisher's loop must keep the worker alive until it is closed.
 */
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from '../helpers/databases';
import { describeWith } from '../helpers/services';
import type { PublisherAppConfig } from './apps/publisher.main';
import { ChildApp } from './support/child-app';
import { sleep } from './support/produce';
import { deleteQueues, uniqueQueue } from './support/rabbitmq';

describeWith(
  ['rabbitmq'],
  `Fault 1: a publisher-only worker process stays alive with nothing due, on ${DATABASE_LABEL.sqlite}`,
  () => {
    let db: TestDatabase;
    let worker: ChildApp;
    const queue = uniqueQueue('worker-alive');

    beforeAll(async () => {
      db = await createTestDatabase('sqlite');
      worker = new ChildApp(
        'publisher.main.ts',
        { db: db.options, synchronize: true, queue } satisfies PublisherAppConfig,
        'publisher-worker',
      );
    });

    afterAll(async () => {
      await worker?.stop();
      await db?.drop();
      await deleteQueues(queue);
    });

    it('is still running 5 s after bootstrap', async () => {
      await worker.start();
      await sleep(5_000);
      expect(worker.running).toBe(true);
    });
  },
);
