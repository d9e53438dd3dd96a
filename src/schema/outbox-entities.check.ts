import type { DataSource } from 'typeorm';
import { OutboxConfigurationError } from '../errors';
import type { OutboxEntitySet } from './outbox-entities';
import { describeTablesOptions, OUTBOX_TABLE_BASE_NAMES } from './outbox-table-names';

type EntityRole = Exclude<keyof OutboxEntitySet, 'tables'>;

/** What each entity is for, in the error. */
const NEEDED_FOR: Record<EntityRole, string> = {
  message: 'the outbox',
  attempt: 'the attempt history',
  keyLock: 'the per-key order on MySQL/MariaDB',
  idempotencyRecord: '@Idempotent()',
  idempotencyStep: 'idempotentStep()',
};

const TABLE_OF: Record<EntityRole, keyof typeof OUTBOX_TABLE_BASE_NAMES> = {
  message: 'messages',
  attempt: 'attempts',
  keyLock: 'keyLocks',
  idempotencyRecord: 'idempotencyKeys',
  idempotencyStep: 'idempotencySteps',
};

/**
 * Throws `OutboxConfigurationError` when an entity of the set `entities` (of the roles `roles`) is not an entity of
 * the DataSource, naming the table, what needs it and the exact `outboxEntities(...)` call to add to its entities.
 */
export function checkEntitiesRegistered(
  dataSource: DataSource,
  name: string,
  entities: OutboxEntitySet,
  roles: readonly EntityRole[],
): void {
  const missing = roles.filter((role) => !dataSource.hasMetadata(entities[role]));
  if (missing.length === 0) return;
  const { tables } = entities;
  const options = describeTablesOptions(tables);
  const list = missing
    .map((role) => {
      const table = tables[TABLE_OF[role]];
      return `${tables.schema === undefined ? table : `${tables.schema}.${table}`} (${NEEDED_FOR[role]})`;
    })
    .join(', ');
  const shipped = options === '';
  const other = dataSource.entityMetadatas
    .filter((m) => m.tableName.endsWith(OUTBOX_TABLE_BASE_NAMES.messages))
    .map((m) => m.tablePath);
  throw new OutboxConfigurationError(
    `The DataSource '${name}' has no entity for the table${missing.length > 1 ? 's' : ''} ${list} of its outbox` +
      `${shipped ? '' : ` (tables: ${options})`}. Add \`...outboxEntities(${options})\` to the \`entities\` of ` +
      `TypeOrmModule.forRoot(${name === 'default' ? '' : `{ name: '${name}', … }`}), or set \`autoLoadEntities: true\`` +
      `, and create the tables with the migrations \`...${shipped ? 'OUTBOX_MIGRATIONS' : `outboxMigrations(${options})`}\`` +
      ` (or \`synchronize: true\` in development).` +
      (other.length > 0
        ? ` Its entities have the outbox table${other.length > 1 ? 's' : ''} ${other.join(', ')}: give ` +
          `OutboxModule.forRoot() the same \`tables\` option as the outboxEntities() call that made ` +
          `${other.length > 1 ? 'them' : 'it'}.`
        : ''),
  );
}
