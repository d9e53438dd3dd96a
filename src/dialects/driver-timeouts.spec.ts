import type { DataSource } from 'typeorm';
import { driverTimeoutWarning } from './driver-timeouts';

const source = (options: object) => ({ options }) as unknown as DataSource;

describe('driverTimeoutWarning', () => {
  it('names the missing pg timeouts once per DataSource', () => {
    const ds = source({ type: 'postgres' });
    const warning = driverTimeoutWarning(ds, 'default');
    expect(warning).toMatch(/DataSource 'default' \(postgres\)/);
    expect(warning).toMatch(/connectTimeoutMS.*extra\.connectionTimeoutMillis/);
    expect(warning).toMatch(/extra\.query_timeout.*extra\.statement_timeout/);
    expect(driverTimeoutWarning(ds, 'default')).toBeUndefined();
  });

  it('is quiet when the driver has its timeouts, and for SQLite', () => {
    expect(
      driverTimeoutWarning(source({ type: 'postgres', connectTimeoutMS: 5000, extra: { query_timeout: 10_000 } }), 'a'),
    ).toBeUndefined();
    expect(
      driverTimeoutWarning(
        source({ type: 'postgres', extra: { connectionTimeoutMillis: 5000, statement_timeout: 10_000 } }),
        'b',
      ),
    ).toBeUndefined();
    expect(
      driverTimeoutWarning(source({ type: 'mariadb', enableQueryTimeout: true, maxQueryExecutionTime: 10_000 }), 'c'),
    ).toBeUndefined();
    expect(driverTimeoutWarning(source({ type: 'better-sqlite3' }), 'd')).toBeUndefined();
  });

  it('names the query timeout of mysql2 (and its unbounded pool queue)', () => {
    const warning = driverTimeoutWarning(source({ type: 'mysql', connectTimeout: 5000 }), 'orders');
    expect(warning).toMatch(/enableQueryTimeout: true.*maxQueryExecutionTime/);
    expect(warning).toMatch(/extra\.queueLimit/);
    expect(driverTimeoutWarning(source({ type: 'postgres', connectTimeoutMS: 5000 }), 'x')).not.toMatch(
      /connectTimeoutMS/,
    );
  });
});
