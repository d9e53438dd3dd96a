import { IdempotencyLock, QueryRunnerIdempotencyStore } from './query-runner.idempotency-store';
import { runOnConnection } from '../../transaction/transaction-runner';

/**
 * SQLite: every transaction of a DataSource shares one connection and takes its turn (the transaction runner's
 * queue), so the "lock" is that turn, held from the read of the record to the commit. Nothing is ever in flight
 * for another request to see.
 */
export class SqliteIdempotencyStore extends QueryRunnerIdempotencyStore {
  protected lock(): Promise<IdempotencyLock> {
    return new Promise((taken) => {
      void runOnConnection(
        this.config.dataSource,
        () =>
          new Promise<void>((release) => taken({ locked: true, sameRequest: true, release: async () => release() })),
      );
    });
  }

  /** Inside a transaction opened elsewhere the DataSource's turn is already held: nothing to take. */
  protected async lockIn(): Promise<IdempotencyLock> {
    return { locked: true, sameRequest: true, release: async () => undefined };
  }

  protected deleteExpiredSql(limit: number): string {
    const q = (c: string) => this.dialect.quote(c);
    return `
      DELETE FROM ${this.quotedTable}
      WHERE ${q('id')} IN (
        SELECT ${q('id')}
        FROM ${this.quotedTable}
        WHERE ${q('expires_at')} <= ${this.dialect.nowMs}
        ORDER BY ${q('expires_at')}
        LIMIT ${limit}
      )`;
  }
}
