import type { INestApplication } from '@nestjs/common';
import { DataSource, QueryFailedError } from 'typeorm';
import { OutboxInvalidMessageError, OutboxMessage, OutboxNoTransactionError, OutboxService } from '../src';
import { OutboxDuplicateMessageIdError, OutboxSerializationError } from '../src/errors';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { TestOrder } from './fixtures/order.entity';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { describeWith } from './helpers/services';

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(servicesOf(kind), `OutboxService.transaction() on ${DATABASE_LABEL[kind]}`, () => {
    let db: TestDatabase;
    let app: INestApplication;
    let outbox: OutboxService;
    let ds: DataSource;
    const label = DATABASE_LABEL[kind];

    beforeAll(async () => {
      db = await createTestDatabase(kind);
      const moduleRef = await createOutboxTestingModule({ db, outbox: { publisher: { enabled: false } } });
      app = moduleRef.createNestApplication();
      await app.init();
      outbox = app.get(OutboxService);
      ds = app.get(DataSource);
    });

    afterAll(async () => {
      await app?.close();
      await db?.drop();
    });

    beforeEach(async () => {
      await ds.createQueryBuilder().delete().from(OutboxMessage).execute();
      await ds.getRepository(TestOrder).clear();
    });

    const counts = async () => ({
      orders: await ds.getRepository(TestOrder).count(),
      events: await ds.getRepository(OutboxMessage).count(),
    });

    it('commits the business row and its event together', async () => {
      const id = await outbox.transaction(async (manager) => {
        const order = await manager.save(TestOrder, { reference: 'A-1', amount: 25 });
        return outbox.emit('OrderPlaced', { orderId: order.id, amount: 25 }, { key: `order-${order.id}` });
      });
      expect(await counts()).toEqual({ orders: 1, events: 1 });
      const row = await ds.getRepository(OutboxMessage).findOneByOrFail({ messageId: id });
      expect(row.pattern).toBe('OrderPlaced');
      expect(JSON.parse(row.payload)).toEqual({ orderId: expect.any(Number), amount: 25 });
      expect(row.status).toBe('pending');
      expect(row.attempts).toBe(0);
      expect(row.key).toMatch(/^order-/);
      expect(row.availableAt).toBeInstanceOf(Date);
      expect(Math.abs(row.createdAt.getTime() - Date.now())).toBeLessThan(60_000);
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    });

    it('rolls back both when the work throws after emit()', async () => {
      await expect(
        outbox.transaction(async (manager) => {
          await manager.save(TestOrder, { reference: 'A-2', amount: 10 });
          await outbox.emit('OrderPlaced', { amount: 10 });
          throw new Error('payment declined');
        }),
      ).rejects.toThrow('payment declined');
      expect(await counts()).toEqual({ orders: 0, events: 0 });
    });

    it('joins the outer transaction from a nested transaction() and from outbox.manager', async () => {
      await expect(
        outbox.transaction(async () => {
          await outbox.transaction(async (inner) => {
            expect(inner).toBe(outbox.manager);
            await inner.save(TestOrder, { reference: 'A-3', amount: 1 });
            await outbox.emit('Nested', { n: 1 });
          });
          await outbox.manager.save(TestOrder, { reference: 'A-4', amount: 2 });
          throw new Error('outer fails');
        }),
      ).rejects.toThrow('outer fails');
      expect(await counts()).toEqual({ orders: 0, events: 0 });
    });

    it('writes through an explicit manager of the caller’s own transaction', async () => {
      await ds.transaction(async (manager) => {
        await manager.save(TestOrder, { reference: 'A-5', amount: 5 });
        await outbox.emit('OrderPlaced', { amount: 5 }, { manager });
      });
      expect(await counts()).toEqual({ orders: 1, events: 1 });
    });

    it('runs concurrent transactions without interference (SQLite queues them)', async () => {
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          outbox
            .transaction(async (manager) => {
              await manager.save(TestOrder, { reference: `C-${i}`, amount: i });
              await outbox.emit('OrderPlaced', { i });
              if (i % 5 === 0) throw new Error(`fail ${i}`);
            })
            .catch(() => undefined),
        ),
      );
      expect(await counts()).toEqual({ orders: 16, events: 16 });
    });

    it('stores availableAt and delay as due times on the database clock', async () => {
      const later = new Date(Date.now() + 3_600_000);
      await outbox.transaction(async () => {
        await outbox.emit('Later', {}, { availableAt: later, messageId: 'fixed-id-1' });
        await outbox.emit('Delayed', {}, { delay: 60_000, messageId: 'fixed-id-2', headers: { tenant: 't1' } });
      });
      const repo = ds.getRepository(OutboxMessage);
      expect((await repo.findOneByOrFail({ messageId: 'fixed-id-1' })).availableAt.getTime()).toBe(later.getTime());
      const delayed = await repo.findOneByOrFail({ messageId: 'fixed-id-2' });
      expect(delayed.availableAt.getTime() - delayed.createdAt.getTime()).toBeGreaterThanOrEqual(59_000);
      expect(JSON.parse(delayed.headers!)).toEqual({ tenant: 't1' });
    });

    describe('bad input gets a named error and writes nothing', () => {
      it('emit() outside a transaction → OutboxNoTransactionError', async () => {
        await expect(outbox.emit('OrderPlaced', {})).rejects.toBeInstanceOf(OutboxNoTransactionError);
        await expect(outbox.emit('OrderPlaced', {})).rejects.toThrow(/outbox\.transaction/);
        expect(() => outbox.manager).toThrow(OutboxNoTransactionError);
        await expect(outbox.emit('OrderPlaced', {}, { manager: ds.manager })).rejects.toThrow(/not in a transaction/);
        expect(await counts()).toEqual({ orders: 0, events: 0 });
      });

      it.each([
        ['an empty pattern', '', {}, OutboxInvalidMessageError],
        ['a blank pattern', '   ', {}, OutboxInvalidMessageError],
        ['a BigInt', 'P', { amount: BigInt(1) }, OutboxSerializationError],
        ['a function', 'P', { f: () => 1 }, OutboxSerializationError],
        ['undefined', 'P', undefined, OutboxSerializationError],
      ])('%s fails inside the transaction, which rolls back', async (_label, pattern, payload, errorClass) => {
        await expect(
          outbox.transaction(async (manager) => {
            await manager.save(TestOrder, { reference: 'B-1', amount: 1 });
            await outbox.emit(pattern as string, payload);
          }),
        ).rejects.toBeInstanceOf(errorClass);
        expect(await counts()).toEqual({ orders: 0, events: 0 });
      });

      if (kind === 'mariadb') {
        it('a payload over the 64 KB TEXT column → OutboxInvalidMessageError naming the limit, nothing written', async () => {
          await expect(
            outbox.transaction(async (manager) => {
              await manager.save(TestOrder, { reference: 'B-2', amount: 1 });
              await outbox.emit('P', { blob: 'x'.repeat(70_000) });
            }),
          ).rejects.toThrow(/payload is 700\d\d bytes.*at most 65535 bytes/);
          expect(await counts()).toEqual({ orders: 0, events: 0 });
        });
      } else {
        it('a large payload (1 MB) is stored whole', async () => {
          const blob = 'x'.repeat(1_000_000);
          const id = await outbox.transaction(() => outbox.emit('Big', { blob }));
          const row = await ds.getRepository(OutboxMessage).findOneByOrFail({ messageId: id });
          expect(JSON.parse(row.payload).blob.length).toBe(1_000_000);
        });
      }

      it(`${label}: a reused messageId → OutboxDuplicateMessageIdError, the business write rolls back`, async () => {
        await outbox.transaction(() => outbox.emit('First', {}, { messageId: 'dup-1' }));
        const error = await outbox
          .transaction(async (manager) => {
            await manager.save(TestOrder, { reference: 'D-1', amount: 1 });
            await outbox.emit('Second', {}, { messageId: 'dup-1', key: 'k-1' });
          })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(OutboxDuplicateMessageIdError);
        expect(error).toBeInstanceOf(OutboxInvalidMessageError);
        expect((error as OutboxDuplicateMessageIdError).messageId).toBe('dup-1');
        expect((error as OutboxDuplicateMessageIdError).code).toBe('OUTBOX_DUPLICATE_MESSAGE_ID');
        expect((error as Error).message).toMatch(/emit\('Second'\): the message id "dup-1" is already in the outbox/);
        expect((error as Error).message).toContain('Leave messageId out');
        expect(await counts()).toEqual({ orders: 0, events: 1 });
        expect((await ds.getRepository(OutboxMessage).findOneByOrFail({ messageId: 'dup-1' })).pattern).toBe('First');
      });

      it(`${label}: one messageId twice in the caller's transaction → named error, nothing committed`, async () => {
        const error = await ds
          .transaction(async (manager) => {
            await manager.save(TestOrder, { reference: 'D-2', amount: 2 });
            await outbox.emit('A', {}, { manager, messageId: 'dup-2' });
            await outbox.emit('B', {}, { manager, messageId: 'dup-2' });
          })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(OutboxDuplicateMessageIdError);
        expect((error as Error).message).toContain('"dup-2"');
        expect(await counts()).toEqual({ orders: 0, events: 0 });
      });

      it(`${label}: another unique index of the outbox table violated → not a duplicate message id`, async () => {
        const q = kind === 'mariadb' ? '`' : '"';
        await ds.query(`CREATE UNIQUE INDEX ${q}UQ_test_pattern${q} ON ${q}outbox_messages${q} (${q}pattern${q})`);
        try {
          await outbox.transaction(() => outbox.emit('Once', {}));
          const error = await outbox.transaction(() => outbox.emit('Once', {})).catch((e: unknown) => e);
          expect(error).toBeInstanceOf(QueryFailedError);
          expect(error).not.toBeInstanceOf(OutboxDuplicateMessageIdError);
        } finally {
          const on = kind === 'mariadb' ? ' ON `outbox_messages`' : '';
          const drop = `DROP INDEX ${q}UQ_test_pattern${q}${on}`;
          await ds.query(drop);
        }
      });

      it('a cyclic payload → OutboxSerializationError naming the fix', async () => {
        const cyclic: Record<string, unknown> = { a: 1 };
        cyclic.self = cyclic;
        await expect(outbox.transaction(() => outbox.emit('P', cyclic))).rejects.toThrow(
          /cannot be serialized to JSON[\s\S]*DTO/,
        );
      });

      it.each([
        ['a non-string header', { headers: { n: 1 as unknown as string } }],
        ['the reserved x-message-id header', { headers: { 'X-Message-Id': 'x' } }],
        ['an empty key', { key: '' }],
        ['a key over 255 characters', { key: 'k'.repeat(256) }],
        ['an invalid availableAt', { availableAt: new Date('nope') }],
        ['a negative delay', { delay: -1 }],
      ])('%s → OutboxInvalidMessageError', async (_label, options) => {
        await expect(outbox.transaction(() => outbox.emit('P', {}, options))).rejects.toBeInstanceOf(
          OutboxInvalidMessageError,
        );
        expect(await counts()).toEqual({ orders: 0, events: 0 });
      });
    });
  });
}
