import { Column, Entity, PrimaryColumn } from 'typeorm';
import {
  OUTBOX_TABLE_BASE_NAMES,
  outboxTableNames,
  type OutboxTableNames,
  tableEntityOptions,
} from './outbox-table-names';

/** Table of the rows that serialize same-key writers on MySQL/MariaDB (shipped name). */
export const OUTBOX_KEY_LOCK_TABLE = OUTBOX_TABLE_BASE_NAMES.keyLocks;

/**
 * MySQL/MariaDB have no transaction-scoped advisory lock, so `emit()` with a `key` updates the key's bucket row
 * here, which holds a row lock until the transaction ends: writers of one key commit one after the other, and the
 * key's messages are numbered in commit order. Unused (but harmless) on PostgreSQL and SQLite. 4096 rows at most.
 */
export abstract class OutboxKeyLockColumns {
  @PrimaryColumn({ type: 'int' })
  bucket!: number;

  /** Bumped by every locking write. */
  @Column({ type: 'bigint', default: 0 })
  n!: string;
}

/** Makes `target` (a subclass of `OutboxKeyLockColumns`) the entity of the table `tables.keyLocks`. */
export function declareOutboxKeyLockTable(target: Function, tables: OutboxTableNames): void {
  Entity(tableEntityOptions(tables, 'keyLocks'))(target);
}

/** The key-lock rows of the shipped table `outbox_key_locks`. */
export class OutboxKeyLock extends OutboxKeyLockColumns {}
declareOutboxKeyLockTable(OutboxKeyLock, outboxTableNames());
