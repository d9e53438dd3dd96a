import { Injectable } from '@nestjs/common';

/**
 * One kind of expired row that the scheduled cleanup removes (sent outbox rows past retention, expired
 * idempotency records, …).
 */
export interface OutboxCleanupTask {
  /** Name used in logs. */
  readonly name: string;
  /** Deletes up to `limit` expired rows in one short transaction and resolves with the number deleted. */
  deleteBatch(limit: number): Promise<number>;
}

/** Where features register their cleanup tasks (in `onModuleInit`); the scheduled cleanup runs them all. */
@Injectable()
export class OutboxCleanupRegistry {
  private readonly tasks: OutboxCleanupTask[] = [];

  register(task: OutboxCleanupTask): void {
    if (!this.tasks.some((t) => t.name === task.name)) this.tasks.push(task);
  }

  all(): readonly OutboxCleanupTask[] {
    return this.tasks;
  }
}
