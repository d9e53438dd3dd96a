import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** A welcome e-mail "sent" after a sign-up (the sample records it instead of calling a mail service). */
@Entity('welcome_emails')
export class WelcomeEmail {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 36 })
  accountId!: string;

  @Column({ type: 'varchar', length: 254 })
  email!: string;

  @CreateDateColumn()
  sentAt!: Date;
}
