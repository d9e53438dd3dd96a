import { Injectable } from '@nestjs/common';
import { OutboxInvalidMessageError } from '../errors';
import { OutboxPublisher } from '../publisher/outbox-publisher';
import { outsideTransactionContext } from '../transaction/transaction-context';
import { runInTransaction, runOnConnection } from '../transaction/transaction-runner';
import { redactSecrets } from '../util/redact-secrets';
import { OutboxDatabase } from '../dialects/outbox-database';
import { OutboxMessage } from '../schema/outbox-message.entity';

/** Filter of `OutboxDeadLetters.list()`. */
export interface ListDeadOptions {
  /** Most rows returned (oldest first). @default 100 */
  limit?: number;
  /** Only rows with this pattern. */
  pattern?: string;
  /** Only rows with this ordering key. */
  key?: string;
}

/**
 * Dead messages: those that exhausted `retry.maxAttempts` or failed with `OutboxNonRetryableError`. A dead message
 * still blocks later messages of its key (per-key order), until it is requeued or purged.
 *
 * ```ts
 * const dead = await deadLetters.list({ pattern: 'OrderPlaced' });
 * await deadLetters.requeue(dead.map((m) => m.messageId)); // or requeue() for all
 * await deadLetters.purge(['…']);                            // or purge() for all
 * ```
 */
@Injectable()
export class OutboxDeadLetters {
  constructor(
    protected readonly database: OutboxDatabase,
    protected readonly publisher: OutboxPublisher,
  ) {}

  /**
   * Dead messages, oldest first, with their last error (redacted of credentials, also for rows stored before
   * redaction existed) and attempt count.
   */
  async list(options: ListDeadOptions = {}): Promise<OutboxMessage[]> {
    const limit = options.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1) {
      throw new OutboxInvalidMessageError(`OutboxDeadLetters.list() option limit must be a positive integer, got ${String(limit)}.`);
    }
    const where: Record<string, unknown> = { status: 'dead' };
    if (options.pattern !== undefined) where.pattern = options.pattern;
    if (options.key !== undefined) where.key = options.key;
    const rows = await runOnConnection(this.database.dataSource, (m) =>
      m.getRepository(OutboxMessage).find({ where, order: { seq: 'ASC' }, take: limit }),
    );
    for (const row of rows) if (row.lastError) row.lastError = redactSecrets(row.lastError);
    return rows;
  }

  /** Number of dead messages. */
  count(): Promise<number> {
    return runOnConnection(this.database.dataSource, (m) => m.getRepository(OutboxMessage).countBy({ status: 'dead' }));
  }

  /**
   * Makes dead messages pending again — the given message ids, or all dead messages when called without — with
   * their attempts reset, due at once. Resolves with the number requeued and wakes the publisher. While someone
   * watches the publisher's `requeued` event (metrics do), the rows are counted per pattern in the same transaction
   * and the event reports them.
   */
  async requeue(messageIds?: readonly string[]): Promise<number> {
    const ids = this.checkIds('requeue', messageIds);
    const { dataSource, dialect, table } = this.database;
    if (!this.publisher.isWatched('requeued')) {
      const count = await runOnConnection(dataSource, (m) => dialect.requeueDead(m, table, ids));
      if (count > 0) this.publisher.wake();
      return count;
    }
    // Someone counts requeues (metrics, a listener): count them per pattern in the requeue's own transaction.
    const { count, patterns } = await outsideTransactionContext(() =>
      runInTransaction(dataSource, async (m) => ({
        patterns: await dialect.countDeadByPattern(m, table, ids),
        count: await dialect.requeueDead(m, table, ids),
      })),
    );
    if (count > 0) {
      this.publisher.reportRequeued({ requeued: count, patterns });
      this.publisher.wake();
    }
    return count;
  }

  /** Deletes dead messages — the given message ids, or all when called without. Resolves with the number deleted. */
  async purge(messageIds?: readonly string[]): Promise<number> {
    const ids = this.checkIds('purge', messageIds);
    const { dataSource, dialect, table } = this.database;
    const count = await runOnConnection(dataSource, (m) => dialect.purgeDead(m, table, ids));
    if (count > 0) this.publisher.wake();
    return count;
  }

  private checkIds(method: string, ids: readonly string[] | undefined): readonly string[] | undefined {
    if (ids === undefined) return undefined;
    if (!Array.isArray(ids) || ids.some((id) => typeof id !== 'string' || id.length === 0)) {
      throw new OutboxInvalidMessageError(
        `OutboxDeadLetters.${method}() takes an array of message ids (non-empty strings), or nothing for all dead messages.`,
      );
    }
    return ids;
  }
}
