import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import type { EntityTarget } from 'typeorm';
import { OutboxSchemaError, OutboxSchemaProblem } from '../errors';
import { IdempotencyRecord } from '../schema/idempotency-record.entity';
import { IdempotencyStep } from '../schema/idempotency-step.entity';
import { CreateOutboxTables1764374400000 } from '../schema/migrations/1764374400000-outbox-tables';
import { CreateIdempotencyKeys1764460800000 } from '../schema/migrations/1764460800000-idempotency-keys';
import { AddOutboxAttempts1765152000000 } from '../schema/migrations/1765152000000-outbox-attempts';
import { CreateIdempotencySteps1765411200000 } from '../schema/migrations/1765411200000-idempotency-steps';
import { AddOutboxDestinations1765497600000 } from '../schema/migrations/1765497600000-outbox-destinations';
import { OutboxAttempt, outboxAttemptsTable } from '../schema/outbox-attempt.entity';
import { OUTBOX_OPTIONS } from '../outbox.constants';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { runOnConnection } from '../transaction/transaction-runner';
import { OutboxDatabase } from '../dialects/outbox-database';
import { OutboxMessage } from '../schema/outbox-message.entity';

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
    if (problems.length > 0) throw schemaError(this.database.name, problems, needed);
  }

  /** The outbox table, the dialect's companions (MySQL/MariaDB: key locks), the idempotency records' and steps' tables. */
  protected neededTables(): NeededTable[] {
    const { dataSource, dialect, table } = this.database;
    const outboxMigration = CreateOutboxTables1764374400000.name;
    const columnsOf = (entity: EntityTarget<unknown>) =>
      dataSource.getMetadata(entity).columns.map((c) => c.databaseName);
    const attemptsMigration = AddOutboxAttempts1765152000000.name;
    const tables: NeededTable[] = [
      {
        table,
        columns: columnsOf(OutboxMessage),
        migration: outboxMigration,
        addedLater: [
          { columns: ['dead_at'], migration: attemptsMigration },
          { columns: ['destination'], migration: AddOutboxDestinations1765497600000.name },
        ],
      },
      ...dialect.companionTables(table).map((t) => ({ ...t, migration: outboxMigration })),
      { table: outboxAttemptsTable(table), columns: columnsOf(OutboxAttempt), migration: attemptsMigration },
    ];
    // Registered by OutboxModule (autoLoadEntities): the scheduled cleanup and @Idempotent() use it.
    if (dataSource.hasMetadata(IdempotencyRecord)) {
      const metadata = dataSource.getMetadata(IdempotencyRecord);
      const migration = CreateIdempotencyKeys1764460800000.name;
      tables.push({ table: metadata.tablePath, columns: columnsOf(IdempotencyRecord), migration });
    }
    // The recorded results of idempotentStep(), registered with the records.
    if (dataSource.hasMetadata(IdempotencyStep)) {
      const migration = CreateIdempotencySteps1765411200000.name;
      const table = dataSource.getMetadata(IdempotencyStep).tablePath;
      tables.push({ table, columns: columnsOf(IdempotencyStep), migration });
    }
    return tables;
  }
}

/** The error naming each gap, the DataSource, the migrations to run and the way out. */
function schemaError(dataSource: string, problems: OutboxSchemaProblem[], needed: NeededTable[]): OutboxSchemaError {
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
      "'nestjs-outbox'; `migrations: [...OUTBOX_MIGRATIONS]` lists every one, with `migrationsRun: true`, or run " +
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
