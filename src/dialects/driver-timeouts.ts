import type { DataSource } from 'typeorm';

/** DataSources already warned about (several outboxes may share one). */
const warned = new WeakSet<DataSource>();

/**
 * The start-up warning for a DataSource whose driver has no connect or query timeout, naming the options to set;
 * undefined when it has them (or was warned about already, or is SQLite). The library bounds only its own waits
 * (`idempotency.connectionTimeout`, `lockTimeout`, `statementTimeout`): a handler's own statements on a database
 * that stalls without closing connections wait as long as the driver lets them.
 */
export function driverTimeoutWarning(dataSource: DataSource, name: string): string | undefined {
  if (warned.has(dataSource)) return undefined;
  const options = dataSource.options as {
    type: string;
    connectTimeoutMS?: number;
    enableQueryTimeout?: boolean;
    maxQueryExecutionTime?: number;
    extra?: Record<string, unknown>;
  };
  const extra = options.extra ?? {};
  const missing: string[] = [];
  if (options.type === 'postgres') {
    if (!options.connectTimeoutMS && !extra.connectionTimeoutMillis) {
      missing.push(
        'no connect timeout — set `connectTimeoutMS` (or `extra.connectionTimeoutMillis`; it also bounds the wait ' +
          'for a pooled connection), e.g. 5000',
      );
    }
    if (!extra.query_timeout && !extra.statement_timeout) {
      missing.push(
        'no query timeout — set `extra.query_timeout` (measured by the client, so it also ends a stall) and/or ' +
          '`extra.statement_timeout` (enforced by the server), e.g. 10000',
      );
    }
  } else if (options.type === 'mysql' || options.type === 'mariadb') {
    if (!(options.enableQueryTimeout && options.maxQueryExecutionTime)) {
      missing.push(
        'no query timeout — set `enableQueryTimeout: true` with `maxQueryExecutionTime` (TypeORM passes it to ' +
          "mysql2 as each query's `timeout`), e.g. 10000; mysql2 connects with `connectTimeout` (10 s by default) " +
          "and queues for a pooled connection without a time limit (`extra.queueLimit` bounds the queue's length)",
      );
    }
  } else {
    return undefined;
  }
  if (missing.length === 0) return undefined;
  warned.add(dataSource);
  return (
    `DataSource '${name}' (${options.type}) has ${missing.join('; and ')}. The library bounds its own waits ` +
    "(`idempotency.connectionTimeout`, `lockTimeout`, `statementTimeout`), but a handler's own statements on a " +
    'database that stops answering without closing connections wait as long as the driver lets them. ' +
    'See docs/reliability.md ("A stalled database, a saturated pool").'
  );
}
