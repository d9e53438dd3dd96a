import type { EntityManager } from 'typeorm';
import type { IsolationLevel } from 'typeorm/driver/types/IsolationLevel';

/**
 * Transactions on a connection the caller hands in — a `pg` pool of the dialect's own, a TypeORM manager — with no
 * ambient context, no plugged-in source and no after-commit callbacks: the dialects' short transactions (the relay's
 * claim, its completion writes, the cleanup's batches). They sit in the dialects' layer of `.dependency-cruiser.cjs`
 * so that the dialects can call them, and import nothing of the library.
 */

/** A `pg` client, as far as `inPoolTransaction()` uses it. */
export interface PoolTransactionClient {
  query(query: unknown): Promise<any>;
  on(event: 'error', listener: (error: unknown) => void): unknown;
  removeListener(event: 'error', listener: (error: unknown) => void): unknown;
  release(error?: unknown): void;
}

/** A `pg` pool, as far as `inPoolTransaction()` uses it. */
export interface PoolTransactionPool {
  connect(): Promise<PoolTransactionClient>;
}

/**
 * Runs `work` on a client of `pool` in a transaction of its own: committed when `work` resolves, rolled back when it
 * (or the commit) throws. `withBegin` — statements sent in the same round trip as `BEGIN` (a `SET LOCAL …`). A
 * client that cannot even roll back is discarded, not given back to the pool.
 */
export async function inPoolTransaction<R>(
  pool: PoolTransactionPool,
  { withBegin }: { withBegin?: string },
  work: (client: PoolTransactionClient) => Promise<R>,
): Promise<R> {
  const client = await pool.connect();
  // A connection lost mid-statement rejects the statement and makes `pg` emit 'error' on the client too; checked
  // out, the client has no listener of the pool's, and an unheard 'error' would end the process.
  const lost = () => undefined;
  client.on('error', lost);
  let broken: unknown;
  try {
    await client.query(withBegin ? `BEGIN; ${withBegin}` : 'BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch((lost: unknown) => (broken = lost));
    throw error;
  } finally {
    client.removeListener('error', lost);
    client.release(broken); // a connection that cannot even roll back is discarded
  }
}

/**
 * Runs `work` in `manager`'s open transaction (joined as it is), else in a new transaction opened on `manager` —
 * at `isolationLevel` when given, else the database's default. Unlike `runInTransaction()`, it looks at the manager
 * it is handed, not at the ambient transaction: the relay's managers are the DataSource's own (outside any caller's
 * transaction, SQLite's turn already taken by `runOnConnection()`) or a transaction's manager passed down.
 */
export function inManagerTransaction<T>(
  manager: EntityManager,
  work: (tx: EntityManager) => Promise<T>,
  isolationLevel?: IsolationLevel,
): Promise<T> {
  if (manager.queryRunner?.isTransactionActive) return work(manager);
  return isolationLevel ? manager.transaction(isolationLevel, work) : manager.transaction(work);
}
