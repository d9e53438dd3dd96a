import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OutboxMessage, OutboxService } from '../../src';
import { AmqpRecorder } from '../helpers/amqp-recorder';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from '../helpers/databases';
import { startOutboxApp } from '../helpers/outbox-test-app';
import { waitFor } from '../helpers/ports';
import { describeWith } from '../helpers/services';
import type { PublisherAppConfig } from './apps/publisher.main';
import { ChildApp } from './support/child-app';
import { killRepeatedly } from './support/kill-loop';
import { uniqueQueue } from './support/rabbitmq';
import { recordFaultRun } from './support/report';

const SCENARIO = '1b kill the WAL relay';
const MESSAGES = 5_000;
const KEYS = 50;
const MIN_KILLS = 4;
const BATCH = 200;
const SLOT = 'nestjs_outbox_outbox_messages';
/** The WAL relay in the child; polling there only for retries (a long hand-off: nothing fresh is polled). */
const PUBLISHER: PublisherAppConfig['publisher'] = {
  mode: 'wal',
  pollingInterval: 200,
  batchSize: BATCH,
  publishTimeout: 2_000,
  leaseDuration: 5_000,
  walHandoff: 120_000,
};

describeWith(
  ['postgres-logical', 'rabbitmq'],
  `Fault ${SCENARIO}: the streaming relay process SIGKILLed ${MIN_KILLS}+ times on ${DATABASE_LABEL['postgres-logical']}`,
  () => {
    let db: TestDatabase;
    let producer: INestApplication;
    let recorder: AmqpRecorder;
    let child: ChildApp;
    const queue = uniqueQueue('kill-wal');

    beforeAll(async () => {
      db = await createTestDatabase('postgres-logical');
      // Creates the tables; writes only (its publisher is off).
      producer = await startOutboxApp(db, { logger: ['error'], outbox: { publisher: { enabled: false } } });
      recorder = await new AmqpRecorder(queue).start();
      child = new ChildApp('publisher.main.ts', { db: db.options, queue, publisher: PUBLISHER }, 'wal-relay');
    });

    afterAll(async () => {
      await child?.stop();
      await producer?.close();
      await recorder?.stop();
      const admin = await new DataSource({ ...(db.options as any) }).initialize();
      await admin.query(
        'SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active',
        [SLOT],
      );
      await admin.destroy();
      await db?.drop();
    });

    it(`all ${MESSAGES} messages arrive, in order per key, resuming from the confirmed LSN after each kill`, async () => {
      const ds = producer.get(DataSource);
      const outbox = producer.get(OutboxService);
      await child.start();
      await waitFor(
        async () =>
          (await ds.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND active', [SLOT])).length > 0,
        'the child streaming from the slot',
      );
      let produced = false;
      const producing = (async () => {
        for (let i = 0; i < MESSAGES; i += 50) {
          const chunk = Array.from({ length: 50 }, (_, j) => i + j);
          await outbox.transaction(() =>
            outbox.emitMany(
              chunk.map((n) => ({ pattern: 'Walled', payload: { n }, options: { key: `k${n % KEYS}` } })),
            ),
          );
          await new Promise((r) => setTimeout(r, 5)); // spread over the kills
        }
      })().finally(() => (produced = true));
      await killRepeatedly(child, { minKills: MIN_KILLS, lifeMs: [600, 1_500], until: () => produced });
      await producing;
      await waitFor(() => recorder.distinct().size >= MESSAGES, `${MESSAGES} distinct messages`, 120_000).catch(
        () => undefined,
      );
      await waitFor(
        async () => (await ds.getRepository(OutboxMessage).countBy({ status: 'sent' })) === MESSAGES,
        'every row marked sent',
        30_000,
      ).catch(() => undefined);

      const ids = (await ds.getRepository(OutboxMessage).find({ select: { messageId: true } })).map((m) => m.messageId);
      const distinct = recorder.distinct();
      const lost = ids.filter((id) => !distinct.has(id)).length;
      const duplicates = recorder.messages.length - distinct.size;
      // Per key, first arrivals in emit order.
      const seen = new Set<string>();
      const last = new Map<number, number>();
      let outOfOrder = 0;
      for (const m of recorder.messages) {
        if (seen.has(m.messageId)) continue;
        seen.add(m.messageId);
        const key = m.data.n % KEYS;
        if ((last.get(key) ?? -1) > m.data.n) outOfOrder++;
        last.set(key, m.data.n);
      }
      const streamed = await ds.getRepository(OutboxMessage).countBy({ status: 'sent', attempts: 0 });
      const unsent = await ds
        .getRepository(OutboxMessage)
        .count({ where: [{ status: 'pending' }, { status: 'dead' }] });
      recordFaultRun({
        scenario: SCENARIO,
        variant: DATABASE_LABEL['postgres-logical'],
        kills: child.kills,
        events: ids.length,
        lost,
        duplicatePublishes: duplicates,
      });
      expect(child.kills).toBeGreaterThanOrEqual(MIN_KILLS);
      expect(ids.length).toBe(MESSAGES);
      expect(lost).toBe(0);
      expect(outOfOrder).toBe(0);
      expect(unsent).toBe(0);
      // Re-published only what a killed reader had not acknowledged: at most its queue and batch in hand per kill.
      expect(duplicates).toBeLessThanOrEqual(child.kills * BATCH * 5);
      // The stream carried them (a polled row keeps attempts 1).
      expect(streamed).toBeGreaterThan(MESSAGES * 0.9);
    }, 300_000);
  },
);
