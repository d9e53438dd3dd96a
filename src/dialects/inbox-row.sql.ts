import { randomUUID } from 'node:crypto';
import type { EntityManager } from 'typeorm';
import type { AttemptHistoryOptions, NewOutboxRow, OutboxDialect } from './outbox-dialect';
import type { SqlDialectCore } from './sql-dialect.core';

/** The first failed attempt of a message stored as an inbox row (`insertFailed()`). */
export interface FirstFailure {
  /** The handler's error, described (it is redacted when written). */
  error: string;
  /** Milliseconds (database clock) before the relay's first retry. */
  retryDelay: number;
  /** Dead at once (a non-retryable error, or `maxAttempts` 1). */
  dead: boolean;
}

/**
 * Writes `row` — a message whose consumer failed — as a row that has already had one counted attempt, in the same
 * SQL on every database and in the caller's transaction: the insert (a duplicate of `(message_id, destination)`
 * fails with the unique violation, which the caller treats as "already stored"), then the row is marked claimed by
 * a token of its own with 1 attempt, and the relay's own `markFailed()` records the failure: retry time or dead,
 * last error, attempt history.
 */
export async function insertFailedRow(
  dialect: SqlDialectCore & Pick<OutboxDialect, 'insert' | 'markFailed'>,
  manager: EntityManager,
  table: string,
  row: NewOutboxRow & { destination: string },
  failure: FirstFailure,
  history: AttemptHistoryOptions,
): Promise<void> {
  await dialect.insert(manager, table, [row]);
  const q = (c: string) => dialect.quote(c);
  const owner = randomUUID();
  const where = `${q('message_id')} = ${dialect.param(3)} AND ${q('destination')} = ${dialect.param(4)}`;
  await dialect.execute(
    manager,
    `UPDATE ${dialect.quoteTable(table)} SET ${q('claimed_by')} = ${dialect.param(1)}, ` +
      `${q('claimed_until')} = ${dialect.nowMs} + ${dialect.param(2)}, ${q('attempts')} = 1 WHERE ${where}`,
    [owner, 60_000, row.messageId, row.destination],
  );
  const { records } = await dialect.execute(
    manager,
    `SELECT ${q('seq')} FROM ${dialect.quoteTable(table)} WHERE ${q('claimed_by')} = ${dialect.param(1)}`,
    [owner],
  );
  const seq = String(records[0]?.seq);
  await dialect.markFailed(manager, table, owner, [{ seq, ...failure }], history);
}
