import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** An account created by `POST /signups`. One per email. */
@Entity('shop_accounts')
export class Account {
  @PrimaryGeneratedColumn('uuid')
  id!: string;

  @Column({ type: 'varchar', length: 254, unique: true })
  email!: string;
}
