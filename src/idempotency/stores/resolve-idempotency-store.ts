import type { IdempotencyStore, IdempotencyStoreConfig } from '../idempotency-store';
import { MysqlIdempotencyStore } from './mysql.idempotency-store';
import { PostgresIdempotencyStore } from './postgres.idempotency-store';
import { SqliteIdempotencyStore } from './sqlite.idempotency-store';

/** The idempotency store of the configured database, picked by its dialect's name (one store per database). */
export function resolveIdempotencyStore(config: IdempotencyStoreConfig): IdempotencyStore {
  switch (config.dialect.name) {
    case 'postgres':
      return new PostgresIdempotencyStore(config);
    case 'mysql':
      return new MysqlIdempotencyStore(config);
    default:
      return new SqliteIdempotencyStore(config);
  }
}
