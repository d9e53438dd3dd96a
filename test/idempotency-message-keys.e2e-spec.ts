import { DataSource } from 'typeorm';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { type IdempotencyBegin, IdempotencyService } from '../src/idempotency/idempotency.service';
import { TestOrder } from './fixtures/order.entity';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];
const HOUR = 3_600_000;
/** The calls are messages: a redelivery may wait for the first delivery. */
const MESSAGE = { ttl: HOUR };
const settledWithin = (promise: Promise<unknown>, ms: number) =>
  Promise.race([promise.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
const F = 'e'.repeat(64);

/** Whether a promise has settled within `ms` (it is still pending otherwise). */
/**
 * How message keys are taken (`IdempotencyService.begin()` with `message`, as deliveries and `once()` call it): on
 * PostgreSQL the key is written first (one statement, sent with BEGIN) and a redelivery racing the first delivery
 * waits for it; on MariaDB and SQLite the locks and the read, as for a request.
 */
for (const kind of kinds) {
  describeWith(servicesOf(kind), `Message keys taken by begin() on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useOutboxApp(kind, {
      logger: false,
      outbox: { publisher: { enabled: false }, idempotency: { ttl: HOUR } },
    });
    let ds: DataSource;
    let idempotency: IdempotencyService;

    beforeAll(() => {
      ds = fx.dataSource;
      idempotency = fx.app.get(IdempotencyService);
    });

    beforeEach(() => ds.getRepository(IdempotencyRecord).clear());

    const acquired = (begun: IdempotencyBegin) => {
      if (begun.kind !== 'acquired') throw new Error(`expected the key to be acquired, got ${begun.kind}`);
      return begun.attempt;
    };
    const record = { fingerprint: F, status: null, body: null, headers: null, ttl: HOUR };

    it('a new key is taken; the effect and the record commit together; a later delivery finds the record', async () => {
      const attempt = acquired(await idempotency.begin('consumer', 'm-1', F, undefined, MESSAGE));
      await attempt.run(() => attempt.context.manager.insert(TestOrder, { reference: 'm-1', amount: 1 }));
      expect(await attempt.commit(record)).toBe(true);
      expect(await ds.getRepository(TestOrder).countBy({ reference: 'm-1' })).toBe(1);
      const again = await idempotency.begin('consumer', 'm-1', F, undefined, MESSAGE);
      expect(again).toEqual({ kind: 'stored', record: { fingerprint: F, status: null, body: null, headers: null } });
    });

    it('a response (@MessagePattern) is stored with the record; a rollback leaves neither effect nor key', async () => {
      const attempt = acquired(await idempotency.begin('consumer', 'm-2', F, undefined, MESSAGE));
      expect(await attempt.commit({ ...record, body: '{"charged":5}' })).toBe(true);
      const again = await idempotency.begin('consumer', 'm-2', F, undefined, MESSAGE);
      expect(again.kind === 'stored' && again.record.body).toBe('{"charged":5}');

      const failed = acquired(await idempotency.begin('consumer', 'm-3', F, undefined, MESSAGE));
      await failed.run(() => failed.context.manager.insert(TestOrder, { reference: 'm-3', amount: 1 }));
      await failed.rollback();
      expect(await ds.getRepository(TestOrder).countBy({ reference: 'm-3' })).toBe(0);
      expect(await ds.getRepository(IdempotencyRecord).countBy({ key: 'm-3' })).toBe(0);
      const retried = acquired(await idempotency.begin('consumer', 'm-3', F, undefined, MESSAGE));
      expect(await retried.commit(record)).toBe(true);
    });

    it('an expired record is replaced by the next delivery', async () => {
      await ds.getRepository(IdempotencyRecord).insert({
        scope: 'consumer',
        key: 'm-old',
        fingerprint: 'a'.repeat(64),
        responseStatus: null,
        responseBody: '"old"',
        responseHeaders: null,
        createdAt: new Date(Date.now() - 2 * HOUR),
        expiresAt: new Date(Date.now() - HOUR),
      });
      const attempt = acquired(await idempotency.begin('consumer', 'm-old', F, undefined, MESSAGE));
      expect(await attempt.commit(record)).toBe(true);
      const rows = await ds.getRepository(IdempotencyRecord).findBy({ key: 'm-old' });
      expect(rows).toHaveLength(1);
      expect(rows[0].fingerprint).toBe(F);
      expect(rows[0].responseBody).toBeNull();
      expect(rows[0].expiresAt.getTime()).toBeGreaterThan(Date.now());
    });

    if (kind === 'postgres') {
      it('a redelivery racing the first delivery waits for its commit, then finds the record (the handler runs once)', async () => {
        const first = acquired(await idempotency.begin('consumer', 'm-race', F, undefined, MESSAGE));
        await first.run(() => first.context.manager.insert(TestOrder, { reference: 'm-race', amount: 1 }));
        const second = idempotency.begin('consumer', 'm-race', F, undefined, MESSAGE);
        expect(await settledWithin(second, 300)).toBe(false);
        expect(await first.commit(record)).toBe(true);
        expect((await second).kind).toBe('stored');
        expect(await ds.getRepository(TestOrder).countBy({ reference: 'm-race' })).toBe(1);
      });

      it('a redelivery racing a first delivery that rolls back takes the key itself', async () => {
        const first = acquired(await idempotency.begin('consumer', 'm-back', F, undefined, MESSAGE));
        const second = idempotency.begin('consumer', 'm-back', F, undefined, MESSAGE);
        expect(await settledWithin(second, 300)).toBe(false);
        await first.rollback();
        const taken = acquired(await second);
        await taken.run(() => taken.context.manager.insert(TestOrder, { reference: 'm-back', amount: 1 }));
        expect(await taken.commit(record)).toBe(true);
        expect(await ds.getRepository(TestOrder).countBy({ reference: 'm-back' })).toBe(1);
        expect(await ds.getRepository(IdempotencyRecord).countBy({ key: 'm-back' })).toBe(1);
      });
    } else if (kind === 'mariadb') {
      it('a redelivery racing the first delivery is told at once that the message is in flight', async () => {
        const first = acquired(await idempotency.begin('consumer', 'm-race', F, undefined, MESSAGE));
        expect(await idempotency.begin('consumer', 'm-race', F, undefined, MESSAGE)).toEqual({
          kind: 'in-flight',
          sameRequest: true,
        });
        await first.rollback();
      });
    }
  });
}
