import { randomUUID } from 'node:crypto';
import { DataSource, EntityManager } from 'typeorm';
import { OutboxInvalidMessageError, OutboxMessage, OutboxService } from '../src';
import { OutboxHandlerInFlightError } from '../src/errors';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { clsTransactionalModule } from './fixtures/cls-transactional';
import { TestOrder } from './fixtures/order.entity';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

const kinds: DatabaseKind[] = ['postgres', 'mariadb', 'sqlite'];
const SCOPE = 'billing.order-placed';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

for (const kind of kinds) {
  describeWith(servicesOf(kind), `OutboxService.once() on ${DATABASE_LABEL[kind]}`, () => {
    // The publisher stays off: the outbox rows `emit()` writes stay in the table for the assertions.
    const fx = useOutboxApp(kind, { outbox: { publisher: { enabled: false } } });

    const orders = (ds: DataSource, reference: string) => ds.getRepository(TestOrder).countBy({ reference });
    const records = (ds: DataSource, scope: string, key: string) =>
      ds.getRepository(IdempotencyRecord).countBy({ scope, key });
    const outboxRows = (ds: DataSource, pattern: string) => ds.getRepository(OutboxMessage).countBy({ pattern });

    /** Work that writes one order and emits one event, through the manager it gets and the ambient transaction. */
    const applyOrder = (outbox: OutboxService, reference: string, seen: EntityManager[] = []) => {
      return async (manager: EntityManager) => {
        seen.push(manager);
        await manager.insert(TestOrder, { reference, amount: 1 });
        await outbox.emit(`Applied.${reference}`, { reference });
      };
    };

    it('runs work once in a transaction with the record, and resolves true', async () => {
      const { outbox, dataSource } = fx;
      const id = randomUUID();
      const seen: EntityManager[] = [];
      let ambient: EntityManager | undefined;
      const ran = await outbox.once(
        id,
        async (manager) => {
          ambient = outbox.manager;
          await applyOrder(outbox, id, seen)(manager);
        },
        { scope: SCOPE },
      );
      expect(ran).toBe(true);
      expect(seen).toHaveLength(1);
      expect(ambient).toBe(seen[0]); // outbox.manager is the manager work got
      expect(await orders(dataSource, id)).toBe(1);
      expect(await outboxRows(dataSource, `Applied.${id}`)).toBe(1); // emit() joined the transaction
      expect(await records(dataSource, SCOPE, id)).toBe(1);
    });

    it('a second call with the same (scope, id) resolves false without running work; another scope runs again', async () => {
      const { outbox, dataSource } = fx;
      const id = randomUUID();
      expect(await outbox.once(id, applyOrder(outbox, id), { scope: SCOPE })).toBe(true);
      let calls = 0;
      const counted = async (manager: EntityManager) => {
        calls++;
        await applyOrder(outbox, id)(manager);
      };
      expect(await outbox.once(id, counted, { scope: SCOPE })).toBe(false);
      expect(calls).toBe(0);
      expect(await orders(dataSource, id)).toBe(1);
      // Another consumer of the same message deduplicates on its own.
      expect(await outbox.once(id, counted, { scope: 'shipping.order-placed' })).toBe(true);
      expect(calls).toBe(1);
      expect(await orders(dataSource, id)).toBe(2);
      expect(await outbox.once(id, counted, { scope: 'shipping.order-placed' })).toBe(false);
      expect(calls).toBe(1);
    });

    it('work that throws leaves no record and no effect, and a retry runs it', async () => {
      const { outbox, dataSource } = fx;
      const id = randomUUID();
      const failure = new Error('handler failed');
      await expect(
        outbox.once(
          id,
          async (manager) => {
            await applyOrder(outbox, id)(manager);
            throw failure;
          },
          { scope: SCOPE },
        ),
      ).rejects.toBe(failure);
      expect(await orders(dataSource, id)).toBe(0);
      expect(await outboxRows(dataSource, `Applied.${id}`)).toBe(0);
      expect(await records(dataSource, SCOPE, id)).toBe(0);
      // The redelivery runs it again, and then it is done.
      expect(await outbox.once(id, applyOrder(outbox, id), { scope: SCOPE })).toBe(true);
      expect(await orders(dataSource, id)).toBe(1);
      expect(await outboxRows(dataSource, `Applied.${id}`)).toBe(1);
      expect(await outbox.once(id, applyOrder(outbox, id), { scope: SCOPE })).toBe(false);
    });

    it('refuses wrong arguments with an error that names the fix, before touching the database', async () => {
      const { outbox } = fx;
      const work = async () => undefined;
      const call = (...args: unknown[]) => (outbox.once as (...a: unknown[]) => Promise<boolean>)(...args);
      await expect(call(undefined, work, { scope: SCOPE })).rejects.toThrow(OutboxInvalidMessageError);
      await expect(call('', work, { scope: SCOPE })).rejects.toThrow(/message's id as its first argument/);
      await expect(call('m-1', undefined, { scope: SCOPE })).rejects.toThrow(/needs work as its second argument/);
      await expect(call('m-1', work)).rejects.toThrow(/needs \{ scope \} as its third argument/);
      await expect(call('m-1', work, {})).rejects.toThrow(OutboxInvalidMessageError);
      await expect(call('m-1', work, { scope: '' })).rejects.toThrow(/needs the scope option/);
      await expect(call('m-1', work, { scope: SCOPE, ttl: 0 })).rejects.toThrow(/option ttl/);
      await expect(outbox.transaction(() => call('m-1', work, { scope: SCOPE }))).rejects.toThrow(
        /called inside a transaction/,
      );
    });

    if (kind !== 'sqlite') {
      // SQLite serializes the transactions of one DataSource: nothing runs concurrently there.
      it('ten concurrent calls with one id, from two apps, apply it once', async () => {
        const { outbox, dataSource } = fx;
        // A second app on the same database: its own connections and its own process-local state.
        const other = (await fx.start({ outbox: { publisher: { enabled: false } } })).get(OutboxService);
        const id = randomUUID();
        let runs = 0;
        const work = async (manager: EntityManager) => {
          runs++;
          await manager.insert(TestOrder, { reference: id, amount: 1 });
          await sleep(200); // the others arrive while this transaction holds the record
        };
        const outcomes = await Promise.allSettled(
          Array.from({ length: 10 }, (_, i) => (i % 2 ? other : outbox).once(id, work, { scope: SCOPE })),
        );
        const applied = outcomes.filter((o) => o.status === 'fulfilled' && o.value === true);
        const rest = outcomes.filter((o) => !(o.status === 'fulfilled' && o.value === true));
        expect(applied).toHaveLength(1);
        // The others are duplicates (false) or were told the message is in flight (to be redelivered).
        for (const outcome of rest) {
          if (outcome.status === 'rejected') expect(outcome.reason).toBeInstanceOf(OutboxHandlerInFlightError);
          else expect(outcome.value).toBe(false);
        }
        expect(await orders(dataSource, id)).toBe(1);
        expect(await records(dataSource, SCOPE, id)).toBe(1);
        expect(runs).toBeGreaterThanOrEqual(1);
        // Whatever was told "in flight" is skipped on its redelivery.
        expect(await outbox.once(id, work, { scope: SCOPE })).toBe(false);
        expect(await orders(dataSource, id)).toBe(1);
      });
    }
  });
}

for (const kind of kinds) {
  describeWith(servicesOf(kind), `OutboxService.once() with transactions: 'cls' on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useOutboxApp(kind, {
      imports: [clsTransactionalModule(false)],
      outbox: { transactions: 'cls', publisher: { enabled: false } },
    });

    it("runs work once in the source's transaction with the record; a throw rolls all back and a retry runs", async () => {
      const { outbox, dataSource } = fx;
      const id = randomUUID();
      const work = async (manager: EntityManager) => {
        expect(outbox.manager).toBe(manager);
        await manager.insert(TestOrder, { reference: id, amount: 1 });
        await outbox.emit(`Applied.${id}`, { id });
      };
      const failure = new Error('handler failed');
      await expect(
        outbox.once(
          id,
          async (manager) => {
            await work(manager);
            throw failure;
          },
          { scope: SCOPE },
        ),
      ).rejects.toBe(failure);
      expect(await dataSource.getRepository(TestOrder).countBy({ reference: id })).toBe(0);
      expect(await dataSource.getRepository(IdempotencyRecord).countBy({ scope: SCOPE, key: id })).toBe(0);
      expect(await outbox.once(id, work, { scope: SCOPE })).toBe(true);
      expect(await outbox.once(id, work, { scope: SCOPE })).toBe(false);
      expect(await dataSource.getRepository(TestOrder).countBy({ reference: id })).toBe(1);
      expect(await dataSource.getRepository(OutboxMessage).countBy({ pattern: `Applied.${id}` })).toBe(1);
      expect(await dataSource.getRepository(IdempotencyRecord).countBy({ scope: SCOPE, key: id })).toBe(1);
    });
  });
}
