import type { DataSource } from 'typeorm';

/** `pg` client settings equivalent to a TypeORM PostgreSQL DataSource's, for connections outside its pool. */
export function pgConnectionConfig(dataSource: DataSource, applicationName: string): Record<string, unknown> {
  const options = ((dataSource.driver as any).options ?? dataSource.options) as Record<string, any>;
  return {
    connectionString: options.url,
    host: options.host,
    port: options.port,
    user: options.username,
    password: options.password,
    database: options.database,
    ssl: options.ssl,
    application_name: applicationName,
  };
}

/** The `pg` module TypeORM loaded for this DataSource. */
export function pgModule(dataSource: DataSource): {
  Client: new (config: object) => any;
  Pool: new (config: object) => any;
} {
  return (dataSource.driver as any).postgres;
}
