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

export const IDEMPOTENCY_TABLE = OUTBOX_TABLE_BASE_NAMES.idempotencyKeys;
export const IDEMPOTENCY_UNIQUE_CONSTRAINT = outboxIndexNames(outboxTableNames()).idempotencyKeys.scopeKeyUnique;

/**
 * One completed idempotent request or handled message: written in the same transaction as the handler's effect, so
 * it exists if and only if that effect committed. There is no "in progress" row to get stuck: an unfinished
 * request holds an uncommitted row (and a lock) that vanishes with its transaction.
 *
 * The unique constraint on (scope, key) decides which request wins. Times are epoch milliseconds on the database
 * clock; `expiresAt` is indexed for the scheduled cleanup.
 */
export abstract class IdempotencyRecordColumns {
  @PrimaryGeneratedColumn({ type: 'bigint', name: 'id' })
  id!: string;

  /** Who the key belongs to: the `scope` option (HTTP) or the consumer, `Controller.method` (messages). */
  @Column({ type: 'varchar', length: 255 })
  scope!: string;

  /** The client's `Idempotency-Key`, or the message id. */
  @Column({ type: 'varchar', length: 255, name: 'idempotency_key' })
  key!: string;

  /** SHA-256 (hex) of what made the request: a reuse of the key with another fingerprint is answered 422. */
  @Column({ type: 'varchar', length: 64 })
  fingerprint!: string;

  /** HTTP status of the stored response (null for messages). */
  @Column({ type: 'int', name: 'response_status', nullable: true })
  responseStatus!: number | null;

  /** The response as the client received it, JSON text (null when the handler returned nothing). */
  @Column({ type: 'text', name: 'response_body', nullable: true })
  responseBody!: string | null;

  /** Replayed response headers, JSON text of a string map. */
  @Column({ type: 'text', name: 'response_headers', nullable: true })
  responseHeaders!: string | null;

  @Column({ type: 'bigint', name: 'created_at', transformer: epochMsTransformer })
  createdAt!: Date;

  /** After this the record is no longer replayed and the cleanup deletes it. */
  @Column({ type: 'bigint', name: 'expires_at', transformer: epochMsTransformer })
  expiresAt!: Date;
}

declareSqliteIntegerKey(IdempotencyRecordColumns);

/** Makes `target` (a subclass of `IdempotencyRecordColumns`) the entity of the table `tables.idempotencyKeys`, with its unique key and index. */
export function declareIdempotencyRecordTable(target: Function, tables: OutboxTableNames): void {
  const names = outboxIndexNames(tables).idempotencyKeys;
  Unique(names.scopeKeyUnique, ['scope', 'key'])(target);
  // The expiry index is the migrations' alone (`synchronize: false`: TypeORM neither creates, drops nor compares
  // it): a B-tree on MySQL/MariaDB and SQLite, BRIN on PostgreSQL (`IdempotencyExpiryBrin1765584000000`), which
  // TypeORM's entity options cannot say per database. An app that synchronizes its schema gets no expiry index;
  // the cleanup then finds expired keys by scanning the table.
  Index(names.expiresAt, { synchronize: false })(target);
  Entity(tableEntityOptions(tables, 'idempotencyKeys'))(target);
}

/** The idempotency records of the shipped table `idempotency_keys` (`outboxEntities({ prefix })` gives others). */
export class IdempotencyRecord extends IdempotencyRecordColumns {}
declareIdempotencyRecordTable(IdempotencyRecord, outboxTableNames());
