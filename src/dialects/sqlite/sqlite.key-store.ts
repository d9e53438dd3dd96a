import { SqlIdempotencyStore } from '../key-store';

/**
 * SQLite: every transaction of a DataSource shares one connection and takes its turn (the transaction runner's
 * queue); the held transaction has the turn from the read of the record to the commit, so there is no lock to
 * take. Nothing is ever in flight for another request to see.
 */
export class SqliteIdempotencyStore extends SqlIdempotencyStore {
  protected lock(): undefined {
    return undefined;
  }

  protected deleteExpiredSql(limit: number): string {
    const q = (c: string) => this.dialect.quote(c);
    return `
      DELETE FROM ${this.table}
      WHERE ${q('id')} IN (
        SELECT ${q('id')}
        FROM ${this.table}
        WHERE ${q('expires_at')} <= ${this.dialect.nowMs}
        ORDER BY ${q('expires_at')}
        LIMIT ${limit}
      )`;
  }
}
