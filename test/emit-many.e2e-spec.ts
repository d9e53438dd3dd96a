import { DataSource } from 'typeorm';
import { OutboxInvalidMessageError, OutboxMessage, OutboxNoTransactionError } from '../src';
import { OutboxDuplicateMessageIdError, OutboxSerializationError } from '../src/errors';
import { OutboxDatabase } from '../src/dialects/outbox-database';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { rmqClientOptions, uniqueQueue } from './helpers/consumers';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

const kinds: DatabaseKind[] = ['postgres', 'mariadb', 'sqlite'];
const COUNT = 10_000;

for (const kind of kinds) {
  describeWith([...servicesOf(kind), 'rabbitmq'], `OutboxService.emitMany() on ${DATABASE_LABEL[kind]}`, () => {
    const queue = uniqueQueue('outbox-emit-many');
    let recorder: AmqpRecorder;
    const fx = useOutboxApp(kind, async (base) => {
      recorder = await new AmqpRecorder(queue).start();
      base.defer(() => recorder.stop());
      return {
        client: rmqClientOptions(queue),
        // Published on flush() only, so each test decides when.
        outbox: { publisher: { enabled: false, batchSize: 1000 } },
      };
    });

    const rows = (ds: DataSource) =>
      ds
        .getRepository(OutboxMessage)
        .find({ order: { seq: 'ASC' }, select: { seq: true, messageId: true, status: true, key: true } });

    beforeEach(async () => {
      await fx.dataSource.createQueryBuilder().delete().from(OutboxMessage).execute();
    });

    it(`writes ${COUNT} events in one transaction, ids in order, and they are all published`, async () => {
      const { outbox } = fx;
      const events = Array.from({ length: COUNT }, (_, n) => ({
        pattern: 'BulkEvent',
        payload: { n },
        // A few with options, so rows of 5 and 6 parameters mix in one statement.
        options: n % 100 === 0 ? { key: `k-${n % 7}`, delay: 0, headers: { 'x-n': String(n) } } : undefined,
      }));
      const ids = await outbox.transaction(() => outbox.emitMany(events));
      expect(ids).toHaveLength(COUNT);
      expect(new Set(ids).size).toBe(COUNT);
      const written = await rows(fx.dataSource);
      // Rows are numbered in the order of the events: the returned ids in order are the rows in `seq` order.
      expect(written.map((r) => r.messageId)).toEqual(ids);
      const payloads = await fx.dataSource
        .getRepository(OutboxMessage)
        .find({ order: { seq: 'ASC' }, select: { seq: true, payload: true }, take: 3 });
      expect(payloads.map((r) => JSON.parse(r.payload))).toEqual([{ n: 0 }, { n: 1 }, { n: 2 }]);

      expect(await outbox.flush()).toBe(COUNT);
      await waitFor(() => recorder.distinct().size >= COUNT, `the ${COUNT} messages to reach RabbitMQ`, 60_000);
      expect([...recorder.distinct()].sort()).toEqual([...ids].sort());
      expect(recorder.messages.find((m) => m.messageId === ids[1])).toMatchObject({
        pattern: 'BulkEvent',
        data: { n: 1 },
      });
      expect((await rows(fx.dataSource)).every((r) => r.status === 'sent')).toBe(true);
    });

    it("splits the INSERT at the database's parameter limit: the fullest statement it allows is accepted", async () => {
      const { outbox } = fx;
      const { maxBindParameters } = fx.app.get(OutboxDatabase).dialect;
      expect(maxBindParameters).toBe(
        { postgres: 65_535, 'postgres-logical': 65_535, mariadb: 65_535, sqlite: 32_766 }[kind],
      );
      // Keyless events without a due time take 5 parameters each: the first statement carries as many rows as
      // the limit allows, the second the one left over.
      const count = Math.floor(maxBindParameters / 5) + 1;
      const events = Array.from({ length: count }, (_, n) => ({ pattern: 'E', payload: n }));
      const ids = await outbox.transaction(() => outbox.emitMany(events));
      expect((await rows(fx.dataSource)).map((r) => r.messageId)).toEqual(ids);
    });

    if (kind !== 'sqlite') {
      it('serializes same-key writers as emit() does: a second emitMany() of the key waits for the first to commit', async () => {
        const { outbox } = fx;
        const events: string[] = [];
        let firstEmitted!: () => void;
        const emitted = new Promise<void>((resolve) => (firstEmitted = resolve));
        const first = outbox.transaction(async () => {
          await outbox.emitMany([
            { pattern: 'E', payload: 1, options: { key: 'K', messageId: 'a1' } },
            { pattern: 'E', payload: 2, options: { key: 'other', messageId: 'a2' } },
            { pattern: 'E', payload: 3, options: { key: 'K', messageId: 'a3' } },
          ]);
          firstEmitted();
          await new Promise((r) => setTimeout(r, 300));
          events.push('first commits');
        });
        await emitted;
        const second = outbox.transaction(async () => {
          await outbox.emitMany([{ pattern: 'E', payload: 4, options: { key: 'K', messageId: 'b1' } }]);
          events.push('second emitted');
        });
        await Promise.all([first, second]);
        expect(events).toEqual(['first commits', 'second emitted']);
        const keyed = (await rows(fx.dataSource)).filter((r) => r.key === 'K');
        expect(keyed.map((r) => r.messageId)).toEqual(['a1', 'a3', 'b1']);
      });
    }

    it('rolls back with the transaction: none of the events is left', async () => {
      const { outbox } = fx;
      const events = Array.from({ length: COUNT }, (_, n) => ({ pattern: 'BulkEvent', payload: { n } }));
      await expect(
        outbox.transaction(async () => {
          await outbox.emitMany(events);
          throw new Error('the business write failed');
        }),
      ).rejects.toThrow('the business write failed');
      expect(await fx.dataSource.getRepository(OutboxMessage).count()).toBe(0);
    });

    it('writes through a given manager, and [] writes nothing', async () => {
      const { outbox } = fx;
      const ids = await fx.dataSource.transaction(async (manager) => {
        expect(await outbox.emitMany([], { manager })).toEqual([]);
        return outbox.emitMany(
          [
            { pattern: 'A', payload: 1 },
            { pattern: 'B', payload: 2, options: { messageId: 'given-id' } },
          ],
          { manager },
        );
      });
      expect(ids).toEqual([expect.any(String), 'given-id']);
      expect((await rows(fx.dataSource)).map((r) => r.messageId)).toEqual(ids);
    });

    it('refuses a message id already in the outbox with OutboxDuplicateMessageIdError, and writes none', async () => {
      const { outbox } = fx;
      await outbox.transaction(() => outbox.emit('A', {}, { messageId: 'taken' }));
      const error = await outbox
        .transaction(() =>
          outbox.emitMany([
            { pattern: 'A', payload: 1 },
            { pattern: 'A', payload: 2, options: { messageId: 'taken' } },
          ]),
        )
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OutboxDuplicateMessageIdError);
      expect((error as Error).message).toMatch(/already in the outbox/);
      // PostgreSQL and MariaDB name the id in their error; SQLite names only the column.
      if (kind !== 'sqlite') expect((error as OutboxDuplicateMessageIdError).messageId).toBe('taken');
      expect((await rows(fx.dataSource)).map((r) => r.messageId)).toEqual(['taken']);
    });

    it('refuses an id given twice in the call before writing anything', async () => {
      const { outbox } = fx;
      const error = await outbox
        .transaction(() =>
          outbox.emitMany([
            { pattern: 'A', payload: 1, options: { messageId: 'twice' } },
            { pattern: 'A', payload: 2, options: { messageId: 'twice' } },
          ]),
        )
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OutboxDuplicateMessageIdError);
      expect(error).toMatchObject({ messageId: 'twice' });
      expect(await fx.dataSource.getRepository(OutboxMessage).count()).toBe(0);
    });

    it('throws the error emit() gives outside a transaction, and for a manager outside one', async () => {
      const { outbox } = fx;
      const events = [{ pattern: 'A', payload: 1 }];
      await expect(outbox.emitMany(events)).rejects.toThrow(OutboxNoTransactionError);
      await expect(outbox.emitMany(events)).rejects.toThrow(/outside a transaction.*outbox\.transaction/s);
      await expect(outbox.emitMany(events, { manager: fx.dataSource.manager })).rejects.toThrow(
        OutboxNoTransactionError,
      );
      await expect(outbox.emitMany([])).rejects.toThrow(OutboxNoTransactionError);
    });

    it('refuses bad input with named errors that point at the event, and writes none of the batch', async () => {
      const { outbox } = fx;
      const bad = async (events: unknown, message: RegExp, type = OutboxInvalidMessageError) => {
        const error = await outbox.transaction(() => outbox.emitMany(events as never)).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(type);
        expect((error as Error).message).toMatch(message);
      };
      await bad('A', /needs an array/);
      await bad([{ pattern: 'A', payload: 1 }, null], /event #1 must be an object/);
      await bad(
        [
          { pattern: 'A', payload: 1 },
          { pattern: '', payload: 1 },
        ],
        /event #1: emit\(\) needs a pattern/,
      );
      await bad([{ pattern: 'A', payload: 1, options: { key: 5 } }], /event #0: .*option key/);
      await bad(
        [{ pattern: 'A', payload: 1, options: { manager: fx.dataSource.manager } }],
        /event #0 has a manager option/,
      );
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      await bad([{ pattern: 'A', payload: cyclic }], /event #0/, OutboxSerializationError);
      expect(await fx.dataSource.getRepository(OutboxMessage).count()).toBe(0);
    });
  });
}
