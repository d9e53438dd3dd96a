import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OutboxMessage, OutboxPublisher, OutboxService } from '../src';
import { OutboxLeaseLostEvent } from '../src/events/publisher-events';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { rmqClientOptions, uniqueQueue } from './helpers/consumers';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/** Holds every publish of `publisher` at a gate until `open()` (a stalled event loop, a slow broker, …). */
function gatePublishes(publisher: OutboxPublisher) {
  const original = (publisher as any).publish.bind(publisher);
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let entered!: () => void;
  const started = new Promise<void>((resolve) => (entered = resolve));
  (publisher as any).publish = async (client: unknown, row: unknown) => {
    entered();
    await gate;
    return original(client, row);
  };
  return { started, open, restore: () => ((publisher as any).publish = original) };
}

const kinds: DatabaseKind[] = ['postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith([...servicesOf(kind), 'rabbitmq'], `Leases and fencing on ${DATABASE_LABEL[kind]} → RabbitMQ`, () => {
    const fx = useTestDatabase(kind);
    const apps: INestApplication[] = [];
    let recorder: AmqpRecorder;
    const queue = uniqueQueue('outbox-lease');

    beforeAll(async () => {
      recorder = await new AmqpRecorder(queue).start();
      fx.defer(() => recorder.stop());
      for (let i = 0; i < 2; i++) {
        apps.push(
          await fx.start({
            client: rmqClientOptions(queue),
            // maxConfirmWait = publishTimeout: a batch's lease is never extended (extensions start a third of the
            // lease after the claim and stop after maxConfirmWait), so the lease left is what these tests set up,
            // however late a busy machine runs the extension timer.
            outbox: { publisher: { enabled: false, publishTimeout: 1000, maxConfirmWait: 1000, leaseDuration: 4000 } },
            logger: false,
          }),
        );
      }
    });

    it('fences the completion write of a publisher whose lease expired mid-publish, and reports the lost lease', async () => {
      const [a, b] = apps.map((app) => app.get(OutboxPublisher));
      const outbox = apps[0].get(OutboxService);
      const repo = apps[0].get(DataSource).getRepository(OutboxMessage);
      const lost: OutboxLeaseLostEvent[] = [];
      a.on('leaseLost', (event) => lost.push(event));
      const id = await outbox.transaction(() => outbox.emit('E', { n: 1 }));

      const gate = gatePublishes(a);
      const passA = a.runPass();
      await gate.started;
      // The lease runs out while A is stuck (as after a long stall): B may take the row over.
      await repo.update({ messageId: id }, { claimedUntil: new Date(0) });
      expect(await b.runPass()).toMatchObject({ claimed: 1, published: 1, fenced: 0 });
      gate.open();
      expect(await passA).toMatchObject({ claimed: 1, published: 0, fenced: 1 });
      gate.restore();

      expect(lost).toEqual([{ dataSource: 'default', owner: expect.any(String), lost: 1, messageIds: [id] }]);
      const row = await repo.findOneByOrFail({ messageId: id });
      expect(row).toMatchObject({ status: 'sent', claimedBy: null, attempts: 2 });
      // Both publishes reached the broker with the same message id: the consumer's deduplication handles it.
      await waitFor(
        () => recorder.messages.filter((m) => m.messageId === id).length === 2,
        'both copies at the consumer',
      );
    });

    it('does not start a publish with less lease left than publishTimeout: the rest of the key is released unstarted', async () => {
      const [a] = apps.map((app) => app.get(OutboxPublisher));
      const outbox = apps[0].get(OutboxService);
      const repo = apps[0].get(DataSource).getRepository(OutboxMessage);
      const [first, second] = await outbox.transaction(async () => [
        await outbox.emit('E', { n: 1 }, { key: 'slow' }),
        await outbox.emit('E', { n: 2 }, { key: 'slow' }),
      ]);
      const original = (a as any).publish.bind(a);
      (a as any).publish = async (client: unknown, row: { messageId: string }) => {
        // The first publish takes 2700 ms of a 4000 ms lease: 1300 ms are left, under publishTimeout + margin.
        if (row.messageId === first) await new Promise((r) => setTimeout(r, 2700));
        return original(client, row);
      };
      try {
        expect(await a.runPass()).toMatchObject({ claimed: 2, published: 1, released: 1, fenced: 0 });
      } finally {
        (a as any).publish = original;
      }
      expect(await repo.findOneByOrFail({ messageId: second })).toMatchObject({
        status: 'pending',
        claimedBy: null,
        attempts: 0,
      });
      expect(await a.runPass()).toMatchObject({ claimed: 1, published: 1 });
      await waitFor(() => recorder.messages.some((m) => m.messageId === second), 'the second message');
      expect(
        recorder.messages.filter((m) => m.messageId === first || m.messageId === second).map((m) => m.messageId),
      ).toEqual([first, second]);
    });
  });
}
