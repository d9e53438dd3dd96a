import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import type { EntityTarget } from 'typeorm';
import { OutboxSchemaError, OutboxSchemaProblem } from '../errors';
import { migrationsForTables } from '../schema/migrations';
import { checkEntitiesRegistered } from '../schema/outbox-entities.check';
import { describeTablesOptions } from '../schema/outbox-table-names';
import { OUTBOX_OPTIONS } from '../outbox.constants';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { runOnConnection } from '../transaction/transaction-runner';
import { OutboxDatabase } from '../dialects/outbox-database';

/** A table the library needs, the columns it uses and the shipped migration that creates it. */
interface NeededTable {
  table: string;
  columns: readonly string[];
  migration: string;
  /** Columns later migrations added, and those migrations (run only them when only these are missing). */
  addedLater?: ReadonlyArray<{ columns: readonly string[]; migration: string }>;
}

/**
 * Fails `app.init()` with `OutboxSchemaError` when a table the library needs is missing or lacks a column, instead
 * of failing the first request (and every publisher poll) later. Runs in `onModuleInit`: after TypeORM's
 * `synchronize` / `migrationsRun` (done while the DataSource initializes) and before the publisher starts.
 * One catalog query per table (see each dialect's `tableColumns`). Off with `schemaCheck: false`.
 */
@Injectable()
export class OutboxSchemaCheck implements OnModuleInit {
  constructor(
    protected readonly database: OutboxDatabase,
    @Inject(OUTBOX_OPTIONS) protected readonly options: ResolvedOutboxOptions,
  ) {}

  async onModuleInit(): Promise<void> {
    if (this.options.schemaCheck === false) return;
    const needed = this.neededTables();
    const problems: OutboxSchemaProblem[] = [];
    const { dataSource, dialect } = this.database;
    for (const { table, columns } of needed) {
      const present = new Set(await runOnConnection(dataSource, (m) => dialect.tableColumns(m, table)));
      const missingColumns = columns.filter((c) => !present.has(c));
      if (missingColumns.length > 0) problems.push({ table, tableMissing: present.size === 0, missingColumns });
    }
    if (problems.length > 0) {
      throw schemaError(this.database.name, problems, needed, describeTablesOptions(this.database.entities.tables));
    }
  }

  /** The outbox table, the dialect's companions (MySQL/MariaDB: key locks), the idempotency records' and steps' tables. */
  protected neededTables(): NeededTable[] {
    const { dataSource, dialect, table, entities, name } = this.database;
    checkEntitiesRegistered(dataSource, name, entities, ['attempt']);
    // The migrations of this outbox's table names (the shipped ones by default), oldest first.
    const [
      outboxMigration,
      recordsMigration,
      attemptsMigration,
      stepsMigration,
      destinationsMigration,
      ,
      expiryMigration,
      causeMigration,
      editAuditMigration,
    ] = migrationsForTables(entities.tables).map((m) => m.name);
    const columnsOf = (entity: EntityTarget<unknown>) =>
      dataSource.getMetadata(entity).columns.map((c) => c.databaseName);
    const pathOf = (entity: EntityTarget<unknown>) => dataSource.getMetadata(entity).tablePath;
    const tables: NeededTable[] = [
      {
        table,
        columns: columnsOf(entities.message),
        migration: outboxMigration,
        addedLater: [
          { columns: ['dead_at'], migration: attemptsMigration },
          { columns: ['destination'], migration: destinationsMigration },
          { columns: ['expires_at'], migration: expiryMigration },
          { columns: ['cause_scope', 'cause_key'], migration: causeMigration },
          { columns: ['edit_audit'], migration: editAuditMigration },
        ],
      },
      ...dialect.companionTables(table).map((t) => ({ ...t, migration: outboxMigration })),
      { table: pathOf(entities.attempt), columns: columnsOf(entities.attempt), migration: attemptsMigration },
    ];
    // Registered by OutboxModule (autoLoadEntities): the scheduled cleanup and @Idempotent() use it.
    if (dataSource.hasMetadata(entities.idempotencyRecord)) {
      const record = entities.idempotencyRecord;
      tables.push({ table: pathOf(record), columns: columnsOf(record), migration: recordsMigration });
    }
    // The recorded results of idempotentStep(), registered with the records.
    if (dataSource.hasMetadata(entities.idempotencyStep)) {
      const step = entities.idempotencyStep;
      tables.push({ table: pathOf(step), columns: columnsOf(step), migration: stepsMigration });
    }
    return tables;
  }
}

/** The error naming each gap, the DataSource, the migrations to run and the way out. */
function schemaError(
  dataSource: string,
  problems: OutboxSchemaProblem[],
  needed: NeededTable[],
  tablesOption: string,
): OutboxSchemaError {
  const list =
    tablesOption === ''
      ? '`migrations: [...OUTBOX_MIGRATIONS]`'
      : `\`migrations: [...outboxMigrations(${tablesOption})]\``;
  const lines = problems.map((p) =>
    p.tableMissing
      ? `- table "${p.table}" does not exist`
      : `- table "${p.table}" lacks the column${p.missingColumns.length > 1 ? 's' : ''} ${p.missingColumns.join(', ')}`,
  );
  const migrations = [
    ...new Set(
      problems.flatMap((p) =>
        migrationsFor(
          p,
          needed.find((t) => t.table === p.table),
        ),
      ),
    ),
  ];
  // A column that a later migration adds is not a sign of a hand-made table.
  const incomplete = problems.some((p) => {
    const later = needed.find((t) => t.table === p.table)?.addedLater;
    return !p.tableMissing && !p.missingColumns.every((c) => later?.some((l) => l.columns.includes(c)));
  });
  return new OutboxSchemaError(
    `nestjs-outbox cannot start: the DataSource '${dataSource}' lacks what it needs.\n${lines.join('\n')}\n` +
      `Fix: run the shipped migration${migrations.length > 1 ? 's' : ''} ${listOf(migrations)} (exported by ` +
      `'nestjs-outbox'; ${list} lists every one, with \`migrationsRun: true\`, or run ` +
      'them with the TypeORM CLI), or set `synchronize: true` in development.' +
      (incomplete ? ' A table that exists but lacks columns was not made by these migrations: add the columns.' : '') +
      ' If your migrations run after the app starts, set `schemaCheck: false` in OutboxModule.forRoot() to skip ' +
      'this check.',
    dataSource,
    problems,
  );
}

/**
 * The shipped migrations that fill one gap: only the later ones that added the missing columns when only such
 * columns are missing; else the one that creates the table and every later one.
 */
function migrationsFor(problem: OutboxSchemaProblem, table: NeededTable | undefined): string[] {
  if (!table) return [];
  const later = table.addedLater ?? [];
  const adds = (c: string) => later.some((l) => l.columns.includes(c));
  if (!problem.tableMissing && later.length > 0 && problem.missingColumns.every(adds)) {
    return later.filter((l) => problem.missingColumns.some((c) => l.columns.includes(c))).map((l) => l.migration);
  }
  return [table.migration, ...later.map((l) => l.migration)];
}

/** `a`, `a and b`, `a, b and c`. */
function listOf(items: readonly string[]): string {
  return items.length <= 1 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}
