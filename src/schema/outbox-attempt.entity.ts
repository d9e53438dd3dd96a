import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';
import type { ValueTransformer } from 'typeorm';
import { OutboxMessage } from './outbox-message.entity';
import { declareSqliteIntegerKey } from './sqlite-bigint-key.patch';

/** Table of the attempt history (`OutboxAttempt`), beside the outbox table in the same schema. */
export const OUTBOX_ATTEMPTS_TABLE = 'outbox_attempts';

/** Name of the foreign key from an attempt to its message (ON DELETE CASCADE). */
export const OUTBOX_ATTEMPTS_MESSAGE_FK = 'FK_outbox_attempts_message';

/** The attempt-history table that belongs to the outbox table `outboxTable` (same schema or database). */
export function outboxAttemptsTable(outboxTable: string): string {
  const parts = outboxTable.split('.');
  parts[parts.length - 1] = OUTBOX_ATTEMPTS_TABLE;
  return parts.join('.');
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
 * One failed publish attempt of an outbox message, written by the publisher in the same fenced
 * statement/transaction that reschedules the message or marks it dead. Only the last `retry.historyLimit`
 * attempts of a message are kept; the rows go with their message (foreign key `ON DELETE CASCADE`), so a purge,
 * the retention cleanup or `deleteOnPublish` removes them too. The index serves both "the history of a message"
 * and the cascade.
 */
@Entity(OUTBOX_ATTEMPTS_TABLE)
@Index('IDX_outbox_attempts_message', ['messageSeq', 'id'])
export class OutboxAttempt {
  /** Write order of attempts. */
  @PrimaryGeneratedColumn({ type: 'bigint', name: 'id' })
  id!: string;

  /** `seq` of the message. */
  @Column({ type: 'bigint', name: 'message_seq' })
  messageSeq!: string;

  @ManyToOne(() => OutboxMessage, { onDelete: 'CASCADE', nullable: false })
  @JoinColumn({
    name: 'message_seq',
    referencedColumnName: 'seq',
    foreignKeyConstraintName: OUTBOX_ATTEMPTS_MESSAGE_FK,
  })
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

declareSqliteIntegerKey(OutboxAttempt);
