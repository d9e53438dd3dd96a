import type { IdempotencyStore, IdempotencyStoreConfig } from './key-store';
import { MysqlIdempotencyStore } from './mysql/mysql.key-store';
import { PostgresIdempotencyStore } from './postgres/postgres.key-store';
import { SqliteIdempotencyStore } from './sqlite/sqlite.key-store';

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
