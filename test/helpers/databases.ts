import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataSource, DataSourceOptions } from 'typeorm';
import { SERVICES } from './services';

export type DatabaseKind = 'sqlite' | 'postgres' | 'mariadb' | 'postgres-logical';

/** Human name used in test titles, so the CI log shows which database ran. */
export const DATABASE_LABEL: Record<DatabaseKind, string> = {
  sqlite: 'SQLite (better-sqlite3)',
  postgres: 'PostgreSQL',
  mariadb: 'MariaDB',
  'postgres-logical': 'PostgreSQL (wal_level=logical)',
};

export interface TestDatabase {
  kind: DatabaseKind;
  /** TypeORM options for this database (without entities). */
  options: DataSourceOptions;
  /** Drops the database (or deletes the SQLite file). */
  drop(): Promise<void>;
}

/**
 * A fresh, uniquely named database on the shared server (or a SQLite file), so test files and concurrent
 * developers never see each other's rows.
 */
export async function createTestDatabase(kind: DatabaseKind): Promise<TestDatabase> {
  const name = `outbox_t_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
  if (kind === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'outbox-sqlite-'));
    return {
      kind,
      options: { type: 'better-sqlite3', database: join(dir, 'test.sqlite') },
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const admin = new DataSource(adminOptions(kind));
  await admin.initialize();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.destroy();
  }
  return {
    kind,
    options: { ...adminOptions(kind), database: name } as DataSourceOptions,
    drop: async () => {
      const a = new DataSource(adminOptions(kind));
      await a.initialize();
      try {
        await a.query(
          kind !== 'mariadb' ? `DROP DATABASE IF EXISTS ${name} WITH (FORCE)` : `DROP DATABASE IF EXISTS ${name}`,
        );
      } finally {
        await a.destroy();
      }
    },
  };
}

function adminOptions(kind: 'postgres' | 'mariadb' | 'postgres-logical'): DataSourceOptions {
  if (kind === 'postgres-logical') {
    return { type: 'postgres', ...SERVICES['postgres-logical'], username: 'postgres', database: 'postgres' };
  }
  if (kind === 'postgres') {
    return { type: 'postgres', ...SERVICES.postgres, username: 'postgres', database: 'postgres' };
  }
  return { type: 'mariadb', ...SERVICES.mariadb, username: 'root', password: '', database: 'test' };
}

/** The services a database kind needs. */
export function servicesOf(kind: DatabaseKind): ('postgres' | 'mariadb' | 'postgres-logical')[] {
  return kind === 'sqlite' ? [] : [kind];
}
