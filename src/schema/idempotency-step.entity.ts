import { Column, Entity, Index, PrimaryGeneratedColumn, Unique } from 'typeorm';
import { epochMsTransformer } from './epoch-ms.transformer';
import {
  OUTBOX_TABLE_BASE_NAMES,
  outboxIndexNames,
  outboxTableNames,
  type OutboxTableNames,
  tableEntityOptions,
} from './outbox-table-names';
import { declareSqliteIntegerKey } from './sqlite-bigint-key.patch';

export const IDEMPOTENCY_STEPS_TABLE = OUTBOX_TABLE_BASE_NAMES.idempotencySteps;
export const IDEMPOTENCY_STEP_UNIQUE_CONSTRAINT =
  outboxIndexNames(outboxTableNames()).idempotencySteps.scopeKeyStepUnique;

/** The longest step name `idempotentStep()` accepts (the column's length). */
export const MAX_STEP_NAME_LENGTH = 100;

/**
 * The recorded result of one completed step (`idempotentStep()`) of an idempotent call: committed on its own, before
 * the handler goes on, so that a retry of the key after a crash resumes after the step instead of calling the
 * external system again. Unlike `IdempotencyRecord`, this row outlives a rollback of the handler's transaction on
 * purpose. It expires `ttl` after it was written (the key's record, written later, expires later still).
 */
export abstract class IdempotencyStepColumns {
  @PrimaryGeneratedColumn({ type: 'bigint', name: 'id' })
  id!: string;

  /** The scope of the key, as in `IdempotencyRecord`. */
  @Column({ type: 'varchar', length: 255 })
  scope!: string;

  /** The client's `Idempotency-Key` (or the message id). */
  @Column({ type: 'varchar', length: 255, name: 'idempotency_key' })
  key!: string;

  /** The step's name, unique within the call. */
  @Column({ type: 'varchar', length: MAX_STEP_NAME_LENGTH })
  step!: string;

  /** The fingerprint of the request that ran the step: a retry with another request is answered 422. */
  @Column({ type: 'varchar', length: 64 })
  fingerprint!: string;

  /** The step's result, JSON text (null when it returned undefined). */
  @Column({ type: 'text', nullable: true })
  result!: string | null;

  @Column({ type: 'bigint', name: 'created_at', transformer: epochMsTransformer })
  createdAt!: Date;

  /** After this the result is ignored (the step runs again) and the cleanup deletes it. */
  @Column({ type: 'bigint', name: 'expires_at', transformer: epochMsTransformer })
  expiresAt!: Date;
}

declareSqliteIntegerKey(IdempotencyStepColumns);

/** Makes `target` (a subclass of `IdempotencyStepColumns`) the entity of the table `tables.idempotencySteps`, with its unique key and index. */
export function declareIdempotencyStepTable(target: Function, tables: OutboxTableNames): void {
  const names = outboxIndexNames(tables).idempotencySteps;
  Unique(names.scopeKeyStepUnique, ['scope', 'key', 'step'])(target);
  Index(names.expiresAt, ['expiresAt'])(target);
  Entity(tableEntityOptions(tables, 'idempotencySteps'))(target);
}

/** The recorded step results of the shipped table `idempotency_steps` (`outboxEntities({ prefix })` gives others). */
export class IdempotencyStep extends IdempotencyStepColumns {}
declareIdempotencyStepTable(IdempotencyStep, outboxTableNames());
