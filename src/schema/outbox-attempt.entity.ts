import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';
import type { ValueTransformer } from 'typeorm';
import { OutboxMessage } from './outbox-message.entity';
import {
  companionTablePath,
  OUTBOX_TABLE_BASE_NAMES,
  outboxIndexNames,
  outboxTableNames,
  type OutboxTableNames,
  tableEntityOptions,
} from './outbox-table-names';
import { declareSqliteIntegerKey } from './sqlite-bigint-key.patch';

/** Table of the attempt history (`OutboxAttempt`), beside the outbox table in the same schema. */
export const OUTBOX_ATTEMPTS_TABLE = OUTBOX_TABLE_BASE_NAMES.attempts;

/** Name of the foreign key from an attempt to its message (ON DELETE CASCADE), of the shipped table. */
export const OUTBOX_ATTEMPTS_MESSAGE_FK = outboxIndexNames(outboxTableNames()).attempts.messageForeignKey;

/** The attempt-history table that belongs to the outbox table `outboxTable` (same schema or database, same prefix). */
export function outboxAttemptsTable(outboxTable: string): string {
  return companionTablePath(outboxTable, 'attempts');
}

/** BIGINT epoch milliseconds read as a number (drivers return BIGINT as a string). */
const epochMsNumber: ValueTransformer = {
  to: (value: number | null | undefined) => value,
  from: (value: string | number | null) => (value === null || value === undefined ? value : Number(value)),
};

/** 0/1 stored in a SMALLINT (portable, and bindable by every driver), read as a boolean. */
const flag: ValueTransformer = {
  to: (value: boolean | null | undefined) => (value === null || value === undefined ? value : value ? 1 : 0),
  from: (value: string | number | null) => (value === null || value === undefined ? value : Number(value) === 1),
};

/**
 * The columns of an attempt-history table (`OutboxAttempt`); the table, its index and the relation to the message
 * are declared by `declareOutboxAttemptTable()`.
 */
export abstract class OutboxAttemptColumns {
  /** Write order of attempts. */
  @PrimaryGeneratedColumn({ type: 'bigint', name: 'id' })
  id!: string;

  /** `seq` of the message. */
  @Column({ type: 'bigint', name: 'message_seq' })
  messageSeq!: string;

  /** The message (relation declared by `declareOutboxAttemptTable()`, to the message entity of the same set). */
  message?: OutboxMessage;

  /** The message's attempt count when this attempt failed (starts again at 1 after a requeue). */
  @Column({ type: 'int' })
  attempt!: number;

  /** When the failure was written, epoch milliseconds on the database clock. */
  @Column({ type: 'bigint', name: 'failed_at', transformer: epochMsNumber })
  failedAt!: number;

  /** Whether the attempt counted toward `retry.maxAttempts` (false: the broker could not be reached). */
  @Column({ type: 'smallint', transformer: flag })
  counted!: boolean;

  /** The error, redacted of credentials. */
  @Column({ type: 'text' })
  error!: string;

  /** Owner token of the publish pass that made the attempt (the claim's fencing token). */
  @Column({ type: 'varchar', length: 36 })
  owner!: string;

  /** The publisher instance that made the attempt (`publisher.instanceId`, by default `hostname:pid`). */
  @Column({ type: 'varchar', length: 255 })
  publisher!: string;
}

declareSqliteIntegerKey(OutboxAttemptColumns);

/**
 * Makes `target` (a subclass of `OutboxAttemptColumns`) the entity of the table `tables.attempts`, its rows
 * belonging to the messages of `message` (foreign key `ON DELETE CASCADE`). The index serves both "the history of
 * a message" and the cascade.
 */
export function declareOutboxAttemptTable(target: Function, message: () => Function, tables: OutboxTableNames): void {
  const names = outboxIndexNames(tables).attempts;
  ManyToOne(message, { onDelete: 'CASCADE', nullable: false })(target.prototype, 'message');
  JoinColumn({ name: 'message_seq', referencedColumnName: 'seq', foreignKeyConstraintName: names.messageForeignKey })(
    target.prototype,
    'message',
  );
  Index(names.message, ['messageSeq', 'id'])(target);
  Entity(tableEntityOptions(tables, 'attempts'))(target);
}

/**
 * One failed publish attempt of an outbox message, written by the publisher in the same fenced
 * statement/transaction that reschedules the message or marks it dead. Only the last `retry.historyLimit`
 * attempts of a message are kept; the rows go with their message (foreign key `ON DELETE CASCADE`), so a purge,
 * the retention cleanup or `deleteOnPublish` removes them too. Shipped table: `outbox_attempts`.
 */
export class OutboxAttempt extends OutboxAttemptColumns {}
declareOutboxAttemptTable(OutboxAttempt, () => OutboxMessage, outboxTableNames());
