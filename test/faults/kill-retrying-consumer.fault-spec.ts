import type { INestApplication } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { OutboxDeadLetters, OutboxMessage } from '../../src';
import { createOutboxTestingModule } from '../fixtures/outbox-app';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from '../helpers/databases';
import { waitFor } from '../helpers/ports';
import { describeWith } from '../helpers/services';
import {
  RETRY_LEDGER_DESTINATION,
  RETRY_LEDGER_PATTERN,
  type RetryConsumerAppConfig,
  type RetryLedgerMessage,
} from './apps/retry-consumer.main';
import { ChildApp } from './support/child-app';
import { FAULT_ENTITIES, FaultEffect } from './support/entities';
import { deleteQueues, queueDepth, RABBITMQ_URL, uniqueQueue } from './support/rabbitmq';
import { recordFaultRun } from './support/report';

const SCENARIO = '11 kill a retrying consumer';
const RETRY: RetryConsumerAppConfig['retry'] = {
  maxAttempts: 4,
  initialDelay: 300,
  factor: 2,
  maxDelay: 2000,
  jitter: 0,
};
/** A short lease: a row claimed by a killed process is taken over within seconds. */
const PUBLISHER: RetryConsumerAppConfig['publisher'] = { pollingInterval: 100, leaseDuration: 3_000 };
const OTHERS = 60;

/**
 * SIGKILL of a RabbitMQ consumer under `@Idempotent({ retry })` (manualAck, prefetch 1) at the two moments of its
 * failure path: (a) after the handler failed and rolled back, before the inbox row is stored — the broker still
 * holds the message unacked and redelivers it to the next incarnation; (b) while the relay runs the message again
 * from its row — the claim and the attempt's transaction die with the process, the row is taken over once its lease
 * ends. Each time among other messages and a transient one: every message applied once, none lost, the poison
 * message dead after at most maxAttempts runs + the killed one, the queue empty at the end.
 */
for (const kind of ['postgres', 'mariadb'] as DatabaseKind[]) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `Fault ${SCENARIO}: SIGKILL between the rollback and the stored row, and during the retries, on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let writer: INestApplication;
      let amqp: import('amqplib').ChannelModel;
      let channel: import('amqplib').Channel;
      const queue = uniqueQueue(`retry-kill-${kind}`);
      const children: ChildApp[] = [];
      const run = `${kind}-${Date.now().toString(36)}`;
      const start = async (hangs: Pick<RetryConsumerAppConfig, 'hangAfterRollback' | 'hangOnRetry'> = {}) => {
        const config: RetryConsumerAppConfig = { db: db.options, queue, retry: RETRY, publisher: PUBLISHER, ...hangs };
        const child = new ChildApp('retry-consumer.main.ts', config, `retry-consumer-${children.length + 1}`);
        children.push(child);
        await child.start();
        return child;
      };

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        // The test reads the tables through an app of its own that does not publish (and creates them).
        const moduleRef = await createOutboxTestingModule({
          db,
          outbox: { client: undefined, publisher: { enabled: false } },
          imports: [TypeOrmModule.forFeature(FAULT_ENTITIES)],
        });
        writer = moduleRef.createNestApplication({ logger: false });
        await writer.init();
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        amqp = await (require('amqplib') as typeof import('amqplib')).connect(RABBITMQ_URL);
        channel = await amqp.createChannel();
        await channel.assertQueue(queue, { durable: true });
      });

      afterAll(async () => {
        for (const child of children) await child.kill();
        await amqp?.close().catch(() => undefined);
        await writer?.close();
        await db?.drop();
        await deleteQueues(queue);
      });

      const ds = () => writer.get(DataSource);
      const effectsOf = (id: string) => ds().getRepository(FaultEffect).countBy({ source: id });
      const rowOf = (id: string) =>
        ds().getRepository(OutboxMessage).findOneBy({ messageId: id, destination: RETRY_LEDGER_DESTINATION });
      const publish = (id: string, data: RetryLedgerMessage) =>
        channel.sendToQueue(queue, Buffer.from(JSON.stringify({ pattern: RETRY_LEDGER_PATTERN, data })), {
          messageId: id,
          persistent: true,
        });
      const runsOf = (id: string) =>
        children.flatMap((c) => c.signals).filter((s) => s.type === 'run' && s.id === id) as unknown as {
          fromRow: boolean;
          attempt: number;
        }[];

      /** Publishes `OTHERS` messages with a poison and a transient one among them; returns their ids. */
      const publishBatch = (phase: string) => {
        const poison = `${run}-${phase}-poison`;
        const transient = `${run}-${phase}-transient`;
        const others: string[] = [];
        for (let n = 0; n < OTHERS; n++) {
          if (n === 5) publish(poison, { n, poison: true });
          if (n === 6) publish(transient, { n, succeedsAt: 3 });
          const id = `${run}-${phase}-m${n}`;
          others.push(id);
          publish(id, { n });
        }
        return { poison, transient, others };
      };

      /** Waits for the batch to settle, records the run and asserts: each applied once, the poison message dead. */
      const expectSettled = async (phase: string, batch: ReturnType<typeof publishBatch>, kills: number) => {
        const { poison, transient, others } = batch;
        const applied = [transient, ...others];
        await waitFor(
          async () => (await rowOf(poison))?.status === 'dead',
          `${phase}: the poison message to go dead`,
          90_000,
        );
        await waitFor(
          async () => (await rowOf(transient))?.status === 'sent',
          `${phase}: the transient message's row to be sent`,
          60_000,
        );
        await waitFor(
          async () => (await ds().getRepository(FaultEffect).count()) >= applied.length,
          `${phase}: every other message applied`,
          60_000,
        ).catch(() => undefined); // the counts below say what is missing
        const counts = await Promise.all(applied.map(effectsOf));
        const lost = applied.filter((_, i) => counts[i] === 0);
        const twice = applied.filter((_, i) => counts[i] > 1);
        const poisonRuns = runsOf(poison);
        recordFaultRun({
          scenario: SCENARIO,
          variant: `${DATABASE_LABEL[kind]} ← RabbitMQ, ${phase}`,
          kills,
          events: applied.length + 1,
          lost: lost.length,
          // Broker deliveries past the first of a message: the ones a kill left unacked.
          redeliveries: [poison, ...applied]
            .map((id) => Math.max(0, runsOf(id).filter((r) => !r.fromRow).length - 1))
            .reduce((a, b) => a + b, 0),
          duplicateEffects: twice.length,
        });
        expect({ lost, twice }).toEqual({ lost: [], twice: [] });
        expect(await effectsOf(poison)).toBe(0);
        for (const id of others) expect(runsOf(id).length).toBeGreaterThanOrEqual(1);
        // At most maxAttempts runs, plus the one the kill interrupted; dead after maxAttempts counted attempts.
        expect(poisonRuns.length).toBeGreaterThanOrEqual(RETRY.maxAttempts);
        expect(poisonRuns.length).toBeLessThanOrEqual(RETRY.maxAttempts + 1);
        const detail = (await writer.get(OutboxDeadLetters).get(poison, RETRY_LEDGER_DESTINATION))!;
        expect(detail.attempts).toBe(RETRY.maxAttempts);
        for (const h of detail.history) expect(h.error).toContain('ledger rejects message 5');
        expect(await ds().getRepository(OutboxMessage).countBy({ messageId: poison })).toBe(1);
        return { poisonRuns, history: detail.history.map((h) => h.attempt) };
      };

      it('(a) killed after the rollback, before the row is stored: the broker redelivers, nothing lost or applied twice', async () => {
        const batch = { poison: `${run}-a-poison`, transient: `${run}-a-transient` };
        const first = await start({ hangAfterRollback: [batch.poison, batch.transient] });
        const published = publishBatch('a');
        await first.waitForSignal((s) => s.type === 'rolled-back' && s.id === published.poison);
        await first.kill();
        // The kill beat the row: nothing of the message is in the database, the broker holds it (unacked → ready).
        expect(await rowOf(published.poison)).toBeNull();
        expect(await effectsOf(published.poison)).toBe(0);

        const second = await start({ hangAfterRollback: [published.transient] });
        await second.waitForSignal((s) => s.type === 'rolled-back' && s.id === published.transient);
        await second.kill();
        expect(await rowOf(published.transient)).toBeNull();

        await start();
        const { poisonRuns, history } = await expectSettled('(a) before the row', published, 2);
        // The killed run came from the broker and counted nothing (no row yet); its redelivery was attempt 1 of
        // the row, whose three retries followed: maxAttempts + 1 runs, the history of the maxAttempts counted.
        expect(poisonRuns.map((r) => r.fromRow)).toEqual([false, false, true, true, true]);
        expect(history).toEqual([1, 2, 3, 4]);
        expect(runsOf(published.transient).filter((r) => !r.fromRow)).toHaveLength(2);
      });

      it('(b) killed while the relay retries the row: taken over after the lease, nothing lost or applied twice', async () => {
        await children.at(-1)?.stop();
        const ids = { poison: `${run}-b-poison`, transient: `${run}-b-transient` };
        const first = await start({ hangOnRetry: [ids.poison, ids.transient] });
        const published = publishBatch('b');
        await first.waitForSignal((s) => s.type === 'hang' && s.id === published.poison, 60_000);
        await first.waitForSignal((s) => s.type === 'hang' && s.id === published.transient, 60_000);
        await first.kill();
        // Its retry was rolled back with the connection: the rows are still to be retried, not applied.
        expect(await effectsOf(published.transient)).toBe(0);
        expect((await rowOf(published.poison))?.status).not.toBe('dead');

        const last = await start();
        const { poisonRuns, history } = await expectSettled('(b) during the retries', published, 1);
        // The relay's claim had counted the killed retry (attempt 2): maxAttempts runs in all; the killed attempt
        // left no error in the history.
        expect(poisonRuns.map((r) => r.attempt)).toEqual([1, 2, 3, 4]);
        expect(history).toEqual([1, 3, 4]);
        await last.stop();
        // Every message was settled with the broker: nothing ready, and nothing was left unacked (back to ready).
        await waitFor(async () => (await queueDepth(queue)) === 0, 'the queue to be empty', 10_000).catch(
          () => undefined,
        );
        expect(await queueDepth(queue)).toBe(0);
      });
    },
  );
}
