import { Column, Entity, PrimaryColumn } from 'typeorm';

/** Table of the rows that serialize same-key writers on MySQL/MariaDB. */
export const OUTBOX_KEY_LOCK_TABLE = 'outbox_key_locks';

/**
 * MySQL/MariaDB have no transaction-scoped advisory lock, so `emit()` with a `key` updates the key's bucket row
 * here, which holds a row lock until the transaction ends: writers of one key commit one after the other, and the
 * key's messages are numbered in commit order. Unused (but harmless) on PostgreSQL and SQLite. 4096 rows at most.
 */
@Entity(OUTBOX_KEY_LOCK_TABLE)
export class OutboxKeyLock {
  @PrimaryColumn({ type: 'int' })
  bucket!: number;

  /** Bumped by every locking write. */
  @Column({ type: 'bigint', default: 0 })
  n!: string;
}
