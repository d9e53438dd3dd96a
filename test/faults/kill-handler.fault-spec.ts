import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OutboxService } from '../../src';
import { TestOrder } from '../fixtures/order.entity';
import { createOutboxTestingModule } from '../fixtures/outbox-app';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from '../helpers/databases';
import { waitFor } from '../helpers/ports';
import { describeWith } from '../helpers/services';
import type { HandlerAppConfig } from './apps/handler.main';
import { ChildApp } from './support/child-app';
import { recordFaultRun } from './support/report';

const SCENARIO = '9 kill an in-process handler';
/** Short lease, so a message claimed by a killed process is taken over within seconds. */
const PUBLISHER: HandlerAppConfig['publisher'] = { pollingInterval: 100, publishTimeout: 1_000, leaseDuration: 2_500 };
const RETRY: HandlerAppConfig['retry'] = { initialDelay: 50, maxDelay: 500, maxAttempts: 100 };

/**
 * SIGKILL of the process running an `@OnOutboxEvent()` handler — inside the handler's open transaction, and just as
 * the handler returns (its commit may or may not have happened) — then a restart: each message's effect exists
 * exactly once and the message ends sent.
 */
for (const kind of ['postgres', 'mariadb'] as DatabaseKind[]) {
  describeWith(servicesOf(kind), `Killing the process of an in-process handler on ${DATABASE_LABEL[kind]}`, () => {
    let db: TestDatabase;
    let writer: INestApplication;
    const children: ChildApp[] = [];
    const start = async (hangOn?: string) => {
      const child = new ChildApp('handler.main.ts', { db: db.options, hangOn, publisher: PUBLISHER, retry: RETRY });
      children.push(child);
      await child.start();
      return child;
    };

    beforeAll(async () => {
      db = await createTestDatabase(kind);
      // The test writes the messages from an app of its own that does not publish (and creates the tables).
      const moduleRef = await createOutboxTestingModule({
        db,
        outbox: { client: undefined, publisher: { enabled: false } },
      });
      writer = moduleRef.createNestApplication({ logger: false });
      await writer.init();
    });

    afterAll(async () => {
      for (const child of children) await child.kill();
      await writer?.close();
      await db?.drop();
    });

    const effects = (ref: string) => writer.get(DataSource).getRepository(TestOrder).countBy({ reference: ref });
    const statusOf = async (id: string) =>
      (await writer.get(DataSource).query(`SELECT status FROM outbox_messages WHERE message_id = '${id}'`))[0]?.status;
    const emit = (ref: string) => {
      const outbox = writer.get(OutboxService);
      return outbox.transaction(() => outbox.emit('Crashable', { ref }));
    };

    it('runs the handler again after a restart and applies each message once', async () => {
      // 1. Killed inside the handler's transaction: its effect and record roll back with the connection.
      const first = await start('during');
      const during = await emit('during');
      await first.waitForSignal((s) => s.type === 'handler' && s.ref === 'during');
      await first.kill();
      expect(await effects('during')).toBe(0);
      expect(await statusOf(during)).toBe('pending');

      // 2. Restarted: the message is taken over once its lease ends and applied; then a kill as a handler returns.
      const second = await start();
      await waitFor(async () => (await statusOf(during)) === 'sent', 'the interrupted message to be applied', 30_000);
      const after = await emit('after');
      await second.waitForSignal((s) => s.type === 'handler' && s.ref === 'after');
      await second.kill();

      // 3. Restarted again: the second message ends sent, its effect once whether or not the kill beat its commit.
      const third = await start();
      await waitFor(async () => (await statusOf(after)) === 'sent', 'the second message to be applied', 30_000);
      const counts = [await effects('during'), await effects('after')];
      const runs = [...first.signals, ...second.signals, ...third.signals].filter((s) => s.type === 'handler');
      recordFaultRun({
        scenario: SCENARIO,
        variant: DATABASE_LABEL[kind],
        kills: first.kills + second.kills,
        events: 2,
        lost: counts.filter((n) => n === 0).length,
        duplicateEffects: counts.filter((n) => n > 1).length,
      });
      expect(counts).toEqual([1, 1]);
      expect(runs.filter((s) => s.ref === 'during').length).toBeGreaterThanOrEqual(2);
    });
  });
}
