import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/** One charge of a payment. A retried `POST /payments` must not record a second one. */
@Entity('shop_charges')
@Index(['reference'])
export class Charge {
  @PrimaryGeneratedColumn('uuid')
  id!: string;

  @Column({ type: 'varchar', length: 100 })
  reference!: string;

  /** In cents. */
  @Column({ type: 'int' })
  amount!: number;

  /** The request's idempotency key, as it would be passed on to a payment provider. */
  @Column({ type: 'varchar', length: 255, name: 'idempotency_key' })
  idempotencyKey!: string;
}
