import type { DataSource, EntityManager } from 'typeorm';

/**
 * SQLite has one connection per DataSource, so a write that must be committed while a longer transaction is open
 * (a step's result, see `idempotentStep()`) can only be committed by that transaction (`commitEarly()` of the
 * transaction runner: COMMIT, then BEGIN again). That is safe only while the transaction holds no write of its
 * own, which `total_changes()` (rows changed on the connection so far) tells: the count when the transaction began
 * against the count now. This file only reads the connection's state; it never ends a transaction.
 */

type Pluck = { get(): unknown };
const statements = new WeakMap<object, Pluck>();

/** Rows changed on the DataSource's better-sqlite3 connection so far; undefined for another driver. */
export function sqliteTotalChanges(dataSource: DataSource): number | undefined {
  const db = (dataSource.driver as unknown as { databaseConnection?: any }).databaseConnection;
  if (!db || typeof db.prepare !== 'function') return undefined;
  let statement = statements.get(db);
  if (!statement) {
    statement = db.prepare('SELECT total_changes()').pluck() as Pluck;
    statements.set(db, statement);
  }
  return Number(statement.get());
}

/** The transaction's nesting depth on `manager` (1 at the top, more inside savepoints); 0 without a transaction. */
export function sqliteTransactionDepth(manager: EntityManager): number {
  const runner = manager.queryRunner as unknown as { isTransactionActive?: boolean; transactionDepth?: number };
  if (!runner?.isTransactionActive) return 0;
  return runner.transactionDepth ?? 1;
}
