import type { OutboxDatabase } from '../dialects/outbox-database';
import { runOnConnection } from '../transaction/transaction-runner';
import type { OutboxCleanupTask } from '../scheduling/outbox-cleanup.registry';

/** Deletes sent outbox rows older than the retention, oldest first, in batches that skip rows others are deleting. */
export class OutboxRetentionTask implements OutboxCleanupTask {
  readonly name = 'outbox:sent-rows';

  constructor(
    private readonly database: OutboxDatabase,
    private readonly retentionMs: number,
  ) {}

  deleteBatch(limit: number): Promise<number> {
    const { dataSource, dialect, table } = this.database;
    return runOnConnection(dataSource, (m) => dialect.deleteExpiredSent(m, table, this.retentionMs, limit));
  }
}
