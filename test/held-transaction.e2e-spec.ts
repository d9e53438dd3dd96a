import { DataSource } from 'typeorm';
import { holdTransaction } from '../src/transaction/held-transaction';
import { TestOrder } from './fixtures/order.entity';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { describeWith } from './helpers/services';

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

/**
 * The transaction runner's held transaction (`src/transaction/held-transaction.ts`), which every idempotency key
 * goes through: statements that open it (`first`), the caller's work in it, statements written as it commits
 * (`commit(last)`), and statements after it ended (`afterEnd`). On PostgreSQL the first and last statements travel
 * in the round trips of `BEGIN` and `COMMIT`: counted here on the driver's connection.
 */
for (const kind of kinds) {
  describeWith(servicesOf(kind), `Held transactions on ${DATABASE_LABEL[kind]}`, () => {
    let db: TestDatabase;
    let ds: DataSource;
    const p = (n: number) => (kind === 'postgres' ? `$${n}` : '?');
    const insert = (reference: string, amount: number) => ({
      sql: `INSERT INTO test_orders (reference, amount) VALUES (${p(1)}, ${p(2)})`,
      params: [reference, amount],
    });
    /** A statement that fails as it runs, on every database: a NOT NULL column left null. */
    const notNull = { sql: `INSERT INTO test_orders (reference, amount) VALUES (${p(1)}, 1)`, params: [null] };
    const count = async (reference: string) => ds.getRepository(TestOrder).countBy({ reference });

    beforeAll(async () => {
      db = await createTestDatabase(kind);
      ds = await new DataSource({ ...db.options, entities: [TestOrder], synchronize: true }).initialize();
    });

    afterAll(async () => {
      await ds?.destroy();
      await db?.drop();
    });

    it('runs the first statements as it opens, the caller’s work in it, the last statements as it commits', async () => {
      const quoted = `it's a \\ "quoted" value ${p(1)}`;
      const held = await holdTransaction(ds, {
        first: [{ sql: `SELECT ${p(1)} AS v, ${p(2)} AS n`, params: [quoted, 7] }, insert('first', 1)],
      });
      const [row] = held.opened[0] as Array<{ v: string; n: unknown }>;
      expect(row.v).toBe(quoted);
      expect(Number(row.n)).toBe(7);
      await held.run(() => held.context.manager.insert(TestOrder, { reference: 'work', amount: 2 }));
      await held.commit([insert('last', 3), insert(quoted, 4)]);
      for (const reference of ['first', 'work', 'last', quoted]) expect(await count(reference)).toBe(1);
    });

    it('a last statement that fails rolls everything back and rejects with its error', async () => {
      const held = await holdTransaction(ds, { first: [insert('doomed-first', 1)] });
      await held.run(() => held.context.manager.insert(TestOrder, { reference: 'doomed-work', amount: 2 }));
      await expect(held.commit([notNull])).rejects.toThrow(/null/i);
      expect(await count('doomed-first')).toBe(0);
      expect(await count('doomed-work')).toBe(0);
      // The connection went back to the pool in a usable state.
      expect(await count('work')).toBe(1);
    });

    it('a first statement that fails opens nothing and still runs the afterEnd statements', async () => {
      const marker = `after-end-${kind}`;
      await expect(
        holdTransaction(ds, {
          first: [insert('never', 1), notNull],
          afterEnd: [insert(marker, 1)],
        }),
      ).rejects.toThrow(/null/i);
      expect(await count('never')).toBe(0);
      expect(await count(marker)).toBe(1); // after the rollback, on the same connection, in autocommit
    });

    it('a rollback leaves nothing of the first statements or the work', async () => {
      const held = await holdTransaction(ds, { first: [insert('rolled-first', 1)] });
      await held.run(() => held.context.manager.insert(TestOrder, { reference: 'rolled-work', amount: 2 }));
      await held.rollback();
      expect(await count('rolled-first')).toBe(0);
      expect(await count('rolled-work')).toBe(0);
    });

    if (kind === 'postgres') {
      it('sends the first statements with BEGIN and the last with COMMIT, as prepared statements once a connection has them', async () => {
        // Each pooled connection prepares a statement the first time it carries it: warm up 8 of the pool of 10 (the pool hands out its most recently used connection next).
        const warm = await Promise.all(
          Array.from({ length: 8 }, () => holdTransaction(ds, { first: [insert('warm', 1), insert('warm', 2)] })),
        );
        await Promise.all(warm.map((held) => held.commit([insert('warm', 4)])));
        const held = await holdTransaction(ds, { first: [insert('trips-first', 1), insert('trips-first', 2)] });
        const client = (held.context.manager.queryRunner as unknown as { databaseConnection: { query: unknown } })
          .databaseConnection as { query: (...args: unknown[]) => unknown };
        const sent: string[] = [];
        const query = client.query;
        client.query = function (this: unknown, ...args: unknown[]) {
          const text = args[0];
          sent.push(typeof text === 'string' ? text : String((text as { text: string }).text));
          return query.apply(this, args);
        };
        try {
          await held.run(() => held.context.manager.insert(TestOrder, { reference: 'trips-work', amount: 3 }));
          await held.commit([insert('trips-last', 4)]);
        } finally {
          client.query = query;
        }
        expect(sent).toHaveLength(2); // the handler's insert, then the last statement with COMMIT
        expect(sent[1]).toMatch(/^EXECUTE nestjs_outbox_[0-9a-f]{16}\('trips-last', 4\);\s*COMMIT$/);
        expect(await count('trips-first')).toBe(2);
        expect(await count('trips-last')).toBe(1);
      });

      it('refuses a value it cannot write as a literal, and rolls back', async () => {
        await expect(
          holdTransaction(ds, { first: [{ sql: 'SELECT $1 AS v', params: [{ not: 'a literal' }] }] }),
        ).rejects.toThrow(/only strings and numbers/);
        expect(await count('work')).toBe(1);
      });

      it('with an isolation level set, runs the same statements one by one', async () => {
        const held = await holdTransaction(ds, {
          isolationLevel: 'SERIALIZABLE',
          first: [{ sql: 'SELECT current_setting($1) AS level', params: ['transaction_isolation'] }],
        });
        expect(held.opened[0]).toEqual([{ level: 'serializable' }]);
        await held.commit([insert('isolated', 1)]);
        expect(await count('isolated')).toBe(1);
      });

      // Last: it turns prepared statements off for this DataSource.
      it('a connection whose prepared statements vanished (DEALLOCATE ALL, a pooling proxy) fails that call, and the next ones go on with plain statements', async () => {
        const held = await holdTransaction(ds, { first: [insert('gone-first', 1)] });
        await held.context.manager.query('DEALLOCATE ALL');
        await expect(held.commit([insert('gone-last', 1)])).rejects.toThrow(/does not exist/);
        expect(await count('gone-first')).toBe(0);
        const again = await holdTransaction(ds, { first: [insert('plain-first', 1)] });
        await again.commit([insert('plain-last', 1)]);
        expect(await count('plain-first')).toBe(1);
        expect(await count('plain-last')).toBe(1);
      });
    }
  });
}
