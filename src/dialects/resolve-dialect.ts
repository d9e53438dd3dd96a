import type { DataSource } from 'typeorm';
import { OutboxConfigurationError } from '../errors';
import { MysqlOutboxDialect } from './mysql/mysql.dialect';
import type { OutboxDialect } from './outbox-dialect';
import { PostgresOutboxDialect } from './postgres/postgres.dialect';
import { SqliteOutboxDialect } from './sqlite/sqlite.dialect';

/**
 * Picks the dialect of a DataSource from its driver type. `advisoryLockClass`: first key of the PostgreSQL advisory
 * locks of same-key writers (one per outbox; the default outbox's when left out).
 */
export function resolveDialect(
  dataSource: DataSource,
  advisoryLockClass?: number,
): OutboxDialect & { execute: SqliteOutboxDialect['execute'] } {
  switch (dataSource.options.type) {
    case 'postgres':
      return new PostgresOutboxDialect(advisoryLockClass);
    case 'mysql':
    case 'mariadb':
      return new MysqlOutboxDialect();
    case 'better-sqlite3':
      return new SqliteOutboxDialect();
    default:
      throw new OutboxConfigurationError(
        `nestjs-outbox does not support the TypeORM driver '${dataSource.options.type}'. ` +
          `Use PostgreSQL ('postgres'), MySQL/MariaDB ('mysql' or 'mariadb') or SQLite ('better-sqlite3').`,
      );
  }
}
