/**
 * Where one outbox keeps its tables: `OutboxModule.forRoot({ tables })`, `outboxEntities()` and
 * `outboxMigrations()` take the same object. Leave it out for the shipped names (`outbox_messages`, …).
 *
 * ```ts
 * { prefix: 'billing_' }                  // billing_outbox_messages, billing_idempotency_keys, … beside the default set
 * { schema: 'billing' }                   // billing.outbox_messages, … (PostgreSQL only)
 * ```
 */
export interface OutboxTablesOptions {
  /**
   * Put before every table name (and so every index and constraint name): letters, digits and `_`, starting with a
   * letter or `_`. Two outboxes with different prefixes share one database or schema without any name colliding.
   * @default '' (the shipped names)
   */
  prefix?: string;
  /**
   * PostgreSQL schema of the tables (it must exist, or be created by `synchronize` or the migrations of
   * `outboxMigrations()`). Not supported on MySQL/MariaDB and SQLite: use a `prefix` there.
   * @default the DataSource's schema (`search_path`, normally `public`)
   */
  schema?: string;
}
