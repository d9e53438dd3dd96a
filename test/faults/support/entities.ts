import { Column, Entity, Index, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';

/**
 * One row per applied effect, written by the consumer's handler in its `@Idempotent()` transaction. Deliberately
 * NOT unique on the message id: a second application of one message shows up here as a second row.
 */
@Entity('fault_effects')
@Index('IDX_fault_effects_source', ['source'])
export class FaultEffect {
  @PrimaryGeneratedColumn()
  id!: number;

  /** Message id (consumers) or idempotency key (HTTP handlers) that caused the effect. */
  @Column({ type: 'varchar', length: 600 })
  source!: string;

  @Column({ type: 'varchar', length: 100, default: '' })
  scope!: string;
}

/** A counter incremented with a non-idempotent `value = value + 1`. */
@Entity('fault_counters')
export class FaultCounter {
  @PrimaryColumn({ type: 'varchar', length: 50 })
  name!: string;

  @Column({ type: 'int', default: 0 })
  value!: number;
}

export const FAULT_ENTITIES = [FaultEffect, FaultCounter];
