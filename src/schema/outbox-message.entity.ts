import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { epochMsOrZero, epochMsTransformer } from './epoch-ms.transformer';
import { outboxIndexNames, outboxTableNames, type OutboxTableNames, tableEntityOptions } from './outbox-table-names';
import { declareSqliteIntegerKey } from './sqlite-bigint-key.patch';

/**
 * Name of the unique index on `(message_id, destination)` of the shipped table: a message id is unique per
 * destination (a message is written as one row per destination, all with its id). Made by the
 * `AddOutboxDestinations1765497600000` migration, which drops the earlier `UQ_outbox_messages_message_id`.
 */
export const MESSAGE_ID_UNIQUE_INDEX = outboxIndexNames(outboxTableNames()).messages.messageIdUnique;

/** Name of the index that serves the dead letters' newest-first pages (of the shipped table). */
export const DEAD_INDEX = outboxIndexNames(outboxTableNames()).messages.dead;

/**
 * Life cycle of an outbox row. In flight = `pending` with a live claim (`claimedUntil` in the future). `replaced`:
 * a dead letter an operator replaced by a corrected copy (`OutboxDeadLetters.editAndRequeue()`), kept as it was
 * with the edit's audit in `editAudit`; it is never published, counted or requeued, and holds back nothing.
 */
export type OutboxMessageStatus = 'pending' | 'sent' | 'dead' | 'replaced';

/**
 * The columns of an outbox table (`OutboxMessage`), shared by the shipped entity and the ones `outboxEntities()`
 * makes for other table names; the table and its indexes are declared by `declareOutboxMessageTable()`.
 */
export abstract class OutboxMessageColumns {
  /** Write order. Also the primary key. */
  @PrimaryGeneratedColumn({ type: 'bigint', name: 'seq' })
  seq!: string;

  /** Stable id assigned when the row is written (UUIDv7 unless given); travels with the message for dedup. */
  @Column({ type: 'varchar', length: 255, name: 'message_id' })
  messageId!: string;

  /** The pattern the consumer's `@EventPattern()` listens to. */
  @Column({ type: 'varchar', length: 255 })
  pattern!: string;

  /** The payload, as JSON text. */
  @Column({ type: 'text' })
  payload!: string;

  /** Extra headers sent with the message, as JSON text of a string map. */
  @Column({ type: 'text', nullable: true })
  headers!: string | null;

  /**
   * Where this row goes: `''` (every destination of the message, decided at publish time), `broker:<token>` or
   * `handler:<name>` (see `destination-names.ts`). A message is one row per destination, all with its message id;
   * each is retried and dead-lettered on its own. Added by the `AddOutboxDestinations1765497600000` migration.
   */
  @Column({ type: 'varchar', length: 255, default: '' })
  destination!: string;

  /** Ordering key: messages with the same key are published in commit order (per destination). */
  @Column({ type: 'varchar', length: 255, nullable: true, name: 'ordering_key' })
  key!: string | null;

  @Column({ type: 'varchar', length: 16, default: 'pending' })
  status!: OutboxMessageStatus;

  /** Publish attempts started so far. */
  @Column({ type: 'int', default: 0 })
  attempts!: number;

  /** When the message becomes due (delayed messages and retries). */
  @Column({ type: 'bigint', name: 'available_at', transformer: epochMsTransformer })
  availableAt!: Date;

  /**
   * When the message expires (`emit()`'s `expiresIn` / `expiresAt`): from then on it is never published, and the
   * publisher makes it a dead letter (or drops it, `publisher.onExpired`). `null`: never.
   */
  @Column({ type: 'bigint', name: 'expires_at', nullable: true, transformer: epochMsTransformer })
  expiresAt!: Date | null;

  @Column({ type: 'bigint', name: 'created_at', transformer: epochMsTransformer })
  createdAt!: Date;

  @Column({ type: 'bigint', name: 'sent_at', nullable: true, transformer: epochMsTransformer })
  sentAt!: Date | null;

  /** Owner token of the current claim (fencing token of one publish pass). */
  @Column({ type: 'varchar', length: 36, nullable: true, name: 'claimed_by' })
  claimedBy!: string | null;

  /** End of the current claim's lease. */
  @Column({ type: 'bigint', nullable: true, name: 'claimed_until', transformer: epochMsTransformer })
  claimedUntil!: Date | null;

  /**
   * When the message went dead (epoch ms on the database clock); 0 while it is not dead (never NULL, so the dead
   * letters' keyset pages see every row). Added by the `AddOutboxAttempts1765152000000` migration.
   */
  @Column({ type: 'bigint', name: 'dead_at', default: 0, transformer: epochMsOrZero })
  deadAt!: Date | null;

  /**
   * The idempotency record of the call whose transaction emitted the row — (scope, key) of an `@Idempotent()`
   * request or message, `outbox-handler:<name>` and the message id for an `@OnOutboxEvent()` handler, or a
   * `once()` call — or null (emitted outside such a call). Read by `OutboxService.trace()`. Added by the
   * `AddOutboxCause1765756800000` migration.
   */
  @Column({ type: 'varchar', length: 255, nullable: true, name: 'cause_scope' })
  causeScope!: string | null;

  /** The key of the causing record (see `causeScope`): the client's idempotency key, or a message id. */
  @Column({ type: 'varchar', length: 255, nullable: true, name: 'cause_key' })
  causeKey!: string | null;

  /**
   * On a `replaced` row, the audit of the edit that replaced it, as JSON text: the corrected copy's id, when, who,
   * why and what changed (values redacted). Null on every other row. Added by the `AddOutboxEditAudit1765843200000`
   * migration.
   */
  @Column({ type: 'text', nullable: true, name: 'edit_audit' })
  editAudit!: string | null;

  /** The last publish error, if any. */
  @Column({ type: 'text', nullable: true, name: 'last_error' })
  lastError!: string | null;
}

declareSqliteIntegerKey(OutboxMessageColumns);

/**
 * Makes `target` (a subclass of `OutboxMessageColumns`) the entity of the table `tables.messages`, with its indexes.
 *
 * Indexes: `claim` serves the publisher's query (pending rows in write order, so history rows are never
 * scanned); `key` serves per-key ordering per destination (only a key's unsent rows are probed); `cleanup` serves
 * retention of sent rows; `dead` serves the dead letters' pages (newest death first); `cause` finds what one call emitted (trace); `(message_id, destination)` is
 * unique.
 */
export function declareOutboxMessageTable(target: Function, tables: OutboxTableNames): void {
  const names = outboxIndexNames(tables).messages;
  Index(names.messageIdUnique, ['messageId', 'destination'], { unique: true })(target);
  Index(names.claim, ['status', 'seq'])(target);
  Index(names.key, ['key', 'status', 'destination', 'seq'])(target);
  Index(names.cleanup, ['status', 'sentAt'])(target);
  Index(names.dead, ['status', 'deadAt', 'seq'])(target);
  Index(names.cause, ['causeKey'])(target);
  Entity(tableEntityOptions(tables, 'messages'))(target);
}

/**
 * One event waiting to be published (or already published / dead), in the shipped table `outbox_messages`. Written
 * in the same transaction as the state change it announces. Times are epoch milliseconds on the database clock.
 * (`outboxEntities({ prefix })` gives the same entity under other table names.)
 */
export class OutboxMessage extends OutboxMessageColumns {}
declareOutboxMessageTable(OutboxMessage, outboxTableNames());
