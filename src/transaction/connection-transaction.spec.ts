import type { EntityManager } from 'typeorm';
import { inManagerTransaction, inPoolTransaction, type PoolTransactionClient } from './connection-transaction';

/** A `pg` pool of one client that records what it is sent; `fail` names the statements that reject. */
function fakePool(fail: (query: unknown) => boolean = () => false) {
  const sent: unknown[] = [];
  const listeners = new Set<unknown>();
  const released: unknown[] = [];
  let listened = 0;
  const client: PoolTransactionClient = {
    query: async (query) => {
      sent.push(query);
      if (fail(query)) throw new Error(`failed: ${JSON.stringify(query)}`);
      return { rows: [{ ok: 1 }], rowCount: 1 };
    },
    on: (_event, listener) => listeners.add(listener) && (listened += 1),
    removeListener: (_event, listener) => listeners.delete(listener),
    release: (...args: unknown[]) => void released.push(args),
  };
  const pool = { connect: async () => client };
  return { pool, sent, listeners, released, listened: () => listened };
}

describe('inPoolTransaction()', () => {
  it('sends withBegin in the round trip of BEGIN, then the work, then COMMIT; gives the client back', async () => {
    const fake = fakePool();
    const result = await inPoolTransaction(fake.pool, { withBegin: 'SET LOCAL lock_timeout = 5' }, (client) =>
      client.query({ text: 'UPDATE t' }),
    );
    expect(result.rowCount).toBe(1);
    expect(fake.sent).toEqual(['BEGIN; SET LOCAL lock_timeout = 5', { text: 'UPDATE t' }, 'COMMIT']);
    expect(fake.listened()).toBe(1);
    expect(fake.listeners.size).toBe(0);
    expect(fake.released).toEqual([[undefined]]);
  });

  it('sends BEGIN alone without withBegin', async () => {
    const fake = fakePool();
    await inPoolTransaction(fake.pool, {}, async () => 'done');
    expect(fake.sent).toEqual(['BEGIN', 'COMMIT']);
  });

  it("rolls back when the work throws, rethrows the work's error and gives the client back", async () => {
    const fake = fakePool((q) => (q as { text?: string }).text === 'UPDATE t');
    await expect(inPoolTransaction(fake.pool, {}, (client) => client.query({ text: 'UPDATE t' }))).rejects.toThrow(
      'UPDATE t',
    );
    expect(fake.sent).toEqual(['BEGIN', { text: 'UPDATE t' }, 'ROLLBACK']);
    expect(fake.listeners.size).toBe(0);
    expect(fake.released).toEqual([[undefined]]);
  });

  it("discards a client whose ROLLBACK failed (release with the rollback's error)", async () => {
    const fake = fakePool((q) => q === 'COMMIT' || q === 'ROLLBACK');
    await expect(inPoolTransaction(fake.pool, {}, async () => 1)).rejects.toThrow('COMMIT');
    expect(fake.sent).toEqual(['BEGIN', 'COMMIT', 'ROLLBACK']);
    expect(fake.released).toHaveLength(1);
    expect(String((fake.released[0] as unknown[])[0])).toContain('ROLLBACK');
  });
});

describe('inManagerTransaction()', () => {
  const managerWith = (active: boolean | undefined) => {
    const opened: unknown[][] = [];
    const tx = { name: 'tx' } as unknown as EntityManager;
    const manager = {
      queryRunner: active === undefined ? undefined : { isTransactionActive: active },
      transaction: (...args: unknown[]) => {
        opened.push(args.slice(0, -1));
        const work = args[args.length - 1] as (m: EntityManager) => Promise<unknown>;
        return work(tx);
      },
    } as unknown as EntityManager;
    return { manager, tx, opened };
  };

  it("joins the manager's open transaction", async () => {
    const { manager, opened } = managerWith(true);
    expect(await inManagerTransaction(manager, async (m) => m, 'READ COMMITTED')).toBe(manager);
    expect(opened).toEqual([]);
  });

  it('opens one on a manager without a transaction, at the isolation level given', async () => {
    const { manager, tx, opened } = managerWith(undefined);
    expect(await inManagerTransaction(manager, async (m) => m, 'READ COMMITTED')).toBe(tx);
    expect(opened).toEqual([['READ COMMITTED']]);
  });

  it("opens one at the database's default level when none is given (a runner without a transaction)", async () => {
    const { manager, tx, opened } = managerWith(false);
    expect(await inManagerTransaction(manager, async (m) => m)).toBe(tx);
    expect(opened).toEqual([[]]);
  });
});
