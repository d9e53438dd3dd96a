import {
  IdempotencyRecord,
  IdempotencyRecordColumns,
  declareIdempotencyRecordTable,
} from './idempotency-record.entity';
import { IdempotencyStep, IdempotencyStepColumns, declareIdempotencyStepTable } from './idempotency-step.entity';
import { OutboxAttempt, OutboxAttemptColumns, declareOutboxAttemptTable } from './outbox-attempt.entity';
import { OutboxKeyLock, OutboxKeyLockColumns, declareOutboxKeyLockTable } from './outbox-key-lock.entity';
import { OutboxMessage, OutboxMessageColumns, declareOutboxMessageTable } from './outbox-message.entity';
import { outboxTableNames, type OutboxTableNames, type OutboxTablesOptions } from './outbox-table-names';

/** The entity classes of one outbox's tables. */
export interface OutboxEntitySet {
  readonly tables: OutboxTableNames;
  readonly message: typeof OutboxMessage;
  readonly attempt: typeof OutboxAttempt;
  readonly keyLock: typeof OutboxKeyLock;
  readonly idempotencyRecord: typeof IdempotencyRecord;
  readonly idempotencyStep: typeof IdempotencyStep;
}

/** One set per table names: asking twice gives the same classes (TypeORM tells entities apart by class). */
const sets = new Map<string, OutboxEntitySet>();

const keyOf = (tables: OutboxTableNames) => `${tables.schema ?? ''}.${tables.prefix}`;

sets.set(keyOf(outboxTableNames()), {
  tables: outboxTableNames(),
  message: OutboxMessage,
  attempt: OutboxAttempt,
  keyLock: OutboxKeyLock,
  idempotencyRecord: IdempotencyRecord,
  idempotencyStep: IdempotencyStep,
});

/** The entity classes of the tables `tables`: the shipped classes for the shipped names, new subclasses otherwise. */
export function outboxEntitySet(tables: OutboxTableNames): OutboxEntitySet {
  const key = keyOf(tables);
  let set = sets.get(key);
  if (!set) {
    const named = <T extends Function>(type: T, base: string): T => {
      Object.defineProperty(type, 'name', {
        value: `${tables.schema ? `${tables.schema}.` : ''}${tables.prefix}${base}`,
      });
      return type;
    };
    const message = named(class extends OutboxMessageColumns {}, 'OutboxMessage');
    const attempt = named(class extends OutboxAttemptColumns {}, 'OutboxAttempt');
    const keyLock = named(class extends OutboxKeyLockColumns {}, 'OutboxKeyLock');
    const idempotencyRecord = named(class extends IdempotencyRecordColumns {}, 'IdempotencyRecord');
    const idempotencyStep = named(class extends IdempotencyStepColumns {}, 'IdempotencyStep');
    declareOutboxMessageTable(message, tables);
    declareOutboxAttemptTable(attempt, () => message, tables);
    declareOutboxKeyLockTable(keyLock, tables);
    declareIdempotencyRecordTable(idempotencyRecord, tables);
    declareIdempotencyStepTable(idempotencyStep, tables);
    set = { tables, message, attempt, keyLock, idempotencyRecord, idempotencyStep };
    sets.set(key, set);
  }
  return set;
}

/**
 * The entities of one outbox's tables, for the `entities` of its DataSource — the same names as
 * `OutboxModule.forRoot({ tables })` and `outboxMigrations()` given the same options. Without options (or with
 * `{}`): the shipped entities (`OutboxMessage`, …), whose tables are `outbox_messages`, `outbox_attempts`,
 * `outbox_key_locks`, `idempotency_keys` and `idempotency_steps`. With a `prefix` or `schema`: entities of the same
 * columns under those names, their indexes and constraints named after their table (so two sets never collide in
 * one schema). Calling it again with the same options gives the same classes.
 *
 * ```ts
 * TypeOrmModule.forRoot({ name: 'billing', …, entities: [Invoice, ...outboxEntities({ prefix: 'billing_' })] })
 * OutboxModule.forRoot({ dataSource: 'billing', tables: { prefix: 'billing_' }, client: 'BILLING_BROKER' })
 * ```
 *
 * Throws `OutboxConfigurationError` for a prefix or schema that is not letters, digits and `_`.
 */
export function outboxEntities(
  options: OutboxTablesOptions = {},
): [
  typeof OutboxMessage,
  typeof OutboxAttempt,
  typeof OutboxKeyLock,
  typeof IdempotencyRecord,
  typeof IdempotencyStep,
] {
  const set = outboxEntitySet(outboxTableNames(options));
  return [set.message, set.attempt, set.keyLock, set.idempotencyRecord, set.idempotencyStep];
}
