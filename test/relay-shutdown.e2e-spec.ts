import type { INestApplication } from '@nestjs/common';
import { DataSource, IsNull, Not } from 'typeorm';
import { OutboxMessage, OutboxService } from '../src';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { rmqClientOptions, uniqueQueue } from './helpers/consumers';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

const KEYS = ['k1', 'k2', 'k3', 'k4'];
const PER_KEY = 60;

const kinds: DatabaseKind[] = ['postgres', 'sqlite'];

for (const kind of kinds) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `Graceful shutdown with a batch in flight on ${DATABASE_LABEL[kind]} → RabbitMQ`,
    () => {
      const fx = useTestDatabase(kind);
      let recorder: AmqpRecorder;
      const queue = uniqueQueue('outbox-shutdown');
      const start = () =>
        fx.start({ client: rmqClientOptions(queue), outbox: { publisher: { pollingInterval: 50 } }, logger: false });

      beforeAll(async () => {
        recorder = await new AmqpRecorder(queue).start();
        fx.defer(() => recorder.stop());
      });

      it('settles in-flight publishes and releases unstarted claims before the client closes; a restart delivers the rest in order', async () => {
        let app: INestApplication = await start();
        const outbox = app.get(OutboxService);
        // Each key's messages go out one after another, so a batch of them stays in flight for a while.
        const written = await outbox.transaction(async () => {
          const ids: string[] = [];
          for (let i = 0; i < PER_KEY; i++)
            for (const key of KEYS) ids.push(await outbox.emit('E', { key, i }, { key }));
          return ids;
        });
        await waitFor(() => recorder.messages.length >= 8, 'the first messages of the batch');
        const ds = app.get(DataSource);
        const options = ds.options;
        await app.close();

        // Right after shutdown: nothing claimed, and everything marked sent was really sent.
        const check = new DataSource({ ...options, entities: [OutboxMessage], synchronize: false } as never);
        await check.initialize();
        try {
          const repo = check.getRepository(OutboxMessage);
          expect(await repo.countBy({ claimedBy: Not(IsNull()) })).toBe(0);
          const sent = await repo.findBy({ status: 'sent' });
          expect(sent.length).toBeLessThan(written.length);
          await waitFor(
            () => sent.every((r) => recorder.distinct().has(r.messageId)),
            'every sent row at the consumer',
          );
          expect(await repo.countBy({ status: 'pending', attempts: Not(0) })).toBe(0);
        } finally {
          await check.destroy();
        }

        app = await start();
        try {
          await waitFor(() => written.every((id) => recorder.distinct().has(id)), 'every message after the restart');
        } finally {
          await app.close();
        }
        for (const key of KEYS) {
          const firstSeen = [...new Set(recorder.messages.filter((m) => m.data.key === key).map((m) => m.messageId))];
          expect(firstSeen.map((id) => recorder.messages.find((m) => m.messageId === id)!.data.i)).toEqual([
            ...Array(PER_KEY).keys(),
          ]);
        }
      });
    },
  );
}
