import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * What the consumer of `OrderPlaced` maintains: `orders += 1`, `totalSpent += amount`. The increment is not
 * idempotent on purpose — applying a redelivered event twice would count the order twice.
 */
@Entity('shop_customer_totals')
export class CustomerTotals {
  @PrimaryColumn({ type: 'varchar', length: 100 })
  id!: string;

  @Column({ type: 'int', default: 0 })
  orders!: number;

  @Column({
    type: 'bigint',
    name: 'total_spent',
    default: 0,
    transformer: { to: (v: number) => v, from: (v: string | number) => Number(v) },
  })
  totalSpent!: number;

  /** Set by `PUT /customers/:id/hold`: the consumer refuses this customer's orders until the hold is released. */
  @Column({ name: 'on_hold', type: 'boolean', default: false })
  onHold!: boolean;
}
