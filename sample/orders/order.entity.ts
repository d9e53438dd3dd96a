import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/** An order. Written in the same transaction as its `OrderPlaced` outbox event. */
@Entity('shop_orders')
@Index(['customerId'])
export class Order {
  /** A UUID assigned by the service, so the event can name the order before the row is written. */
  @PrimaryColumn({ type: 'varchar', length: 36 })
  id!: string;

  @Column({ type: 'varchar', length: 100, name: 'customer_id' })
  customerId!: string;

  @Column({ type: 'varchar', length: 100 })
  reference!: string;

  /** In the smallest currency unit (cents). */
  @Column({ type: 'int' })
  amount!: number;

  /** Message id of the `OrderPlaced` event written with this order (what the consumer deduplicates by). */
  @Column({ type: 'varchar', length: 255, name: 'event_id', nullable: true })
  eventId!: string | null;
}
