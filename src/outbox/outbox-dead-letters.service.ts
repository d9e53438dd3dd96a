import { Injectable } from '@nestjs/common';
import { OutboxDeadLetterQueryError, OutboxInvalidMessageError } from '../errors';
import type { DeadRow } from '../dialects/outbox-dialect';
import { checkFilter, checkIds, checkLimit, decodeCursor, encodeCursor } from './dead-letter-query';
import type {
  DeadLetterFilter,
  DeadLetterPage,
  DeadLetterPageQuery,
  DeadLetterSummary,
  OutboxMessageDetail,
} from './dead-letter.model';
import { OutboxPublisher } from '../publisher/outbox-publisher';
import { outsideTransactionContext } from '../transaction/transaction-context';
import { runInTransaction, runOnConnection } from '../transaction/transaction-runner';
import { redactSecrets } from '../util/redact-secrets';
import { OutboxDatabase } from '../dialects/outbox-database';
import type { OutboxMessage } from '../schema/outbox-message.entity';

/** Filter of `OutboxDeadLetters.list()`. */
export interface ListDeadOptions {
  /** Most rows returned (oldest first). @default 100 */
  limit?: number;
  /** Only rows with this pattern. */
  pattern?: string;
  /** Only rows with this ordering key. */
  key?: string;
  /** Only rows of this destination (`''`, `broker:<token>`, `handler:<name>`). */
  destination?: string;
}

/**
 * Dead messages: those that exhausted `retry.maxAttempts` or failed with `OutboxNonRetryableError`. A dead message
 * still blocks later messages of its key (per-key order), until it is requeued or purged.
 *
 * ```ts
 * const { items, nextCursor } = await deadLetters.page({ pattern: 'OrderPlaced', errorContains: 'timeout' });
 * const one = await deadLetters.get(items[0].messageId);   // payload, headers, attempt history
 * await deadLetters.requeue({ pattern: 'OrderPlaced' });     // by filter; or ids; or requeue() for all
 * await deadLetters.purge(['…']);                            // or a filter; or purge() for all
 * ```
 *
 * Every result is plain JSON (times in epoch milliseconds on the database clock), ready for an HTTP API.
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
      throw new OutboxInvalidMessageError(
        `OutboxDeadLetters.list() option limit must be a positive integer, got ${String(limit)}.`,
      );
    }
    const where: Record<string, unknown> = { status: 'dead' };
    if (options.pattern !== undefined) where.pattern = options.pattern;
    if (options.key !== undefined) where.key = options.key;
    if (options.destination !== undefined) where.destination = options.destination;
    const rows = await runOnConnection(this.database.dataSource, (m) =>
      m.getRepository(this.database.entities.message).find({ where, order: { seq: 'ASC' }, take: limit }),
    );
    for (const row of rows) if (row.lastError) row.lastError = redactSecrets(row.lastError);
    return rows;
  }

  /** Number of dead messages, of those matching `filter` when given. */
  async count(filter?: DeadLetterFilter): Promise<number> {
    const where = checkFilter('count', filter);
    const { dataSource, dialect, table } = this.database;
    return runOnConnection(dataSource, (m) => dialect.countDead(m, table, where));
  }

  /**
   * One page of dead messages matching the query's filter, newest death first (ties: newest written first). Pages
   * are keyset pages: pass `nextCursor` back as `cursor` (with the same filter) for the next one; each costs one
   * index range scan however deep it is, and walking the pages lists every message that stays dead exactly once,
   * while others die, are requeued or purged meanwhile (messages that die meanwhile sort before the first page).
   */
  async page(query: DeadLetterPageQuery = {}): Promise<DeadLetterPage> {
    const { limit: rawLimit, cursor, ...rest } = query ?? {};
    const filter = checkFilter('page', { ...rest });
    const limit = checkLimit('page', rawLimit, 50);
    const after = decodeCursor('page', cursor);
    const { dataSource, dialect, table } = this.database;
    const rows = await runOnConnection(dataSource, (m) =>
      dialect.listDead(m, table, { filter, after, limit: limit + 1 }),
    );
    const items = rows.slice(0, limit);
    const last = items[items.length - 1];
    return {
      items: items.map(toSummary),
      nextCursor: rows.length > limit && last ? encodeCursor({ deadAt: last.deadAt, seq: last.seq }) : null,
    };
  }

  /**
   * One message — dead or not — with its payload, headers and attempt history (the newest `retry.historyLimit`
   * failed attempts, oldest first, errors redacted), or null when no row has this id (never written, purged, or
   * removed after it was published). A message is one row per destination: this is the row of `destination` when
   * given, else its first dead row, else its first unsent one, else its first; `destinations` lists them all.
   */
  async get(messageId: string, destination?: string): Promise<OutboxMessageDetail | null> {
    if (typeof messageId !== 'string' || messageId.length === 0 || messageId.length > 255) {
      throw new OutboxDeadLetterQueryError(
        `OutboxDeadLetters.get() takes a message id (a non-empty string of at most 255 characters), got ` +
          `${JSON.stringify(String(messageId))}. Pass the messageId of a listed message.`,
      );
    }
    if (destination !== undefined && (typeof destination !== 'string' || destination.length > 255)) {
      throw new OutboxDeadLetterQueryError(
        'OutboxDeadLetters.get() takes as destination a string of at most 255 characters (a listed ' +
          "message's destination). Leave it out for the message's first dead row.",
      );
    }
    const { dataSource, dialect, table } = this.database;
    return runOnConnection(dataSource, async (m) => {
      const rows = await m
        .getRepository(this.database.entities.message)
        .find({ where: { messageId }, order: { seq: 'ASC' } });
      const row =
        destination !== undefined
          ? rows.find((r) => r.destination === destination)
          : (rows.find((r) => r.status === 'dead') ?? rows.find((r) => r.status === 'pending') ?? rows[0]);
      if (!row) return null;
      const history = await dialect.listAttempts(m, table, row.seq);
      return {
        messageId: row.messageId,
        pattern: row.pattern,
        key: row.key,
        destination: row.destination,
        destinations: rows.map((r) => ({ destination: r.destination, status: r.status, attempts: r.attempts })),
        status: row.status,
        attempts: row.attempts,
        createdAt: row.createdAt.getTime(),
        deadAt: row.deadAt ? row.deadAt.getTime() : null,
        lastError: row.lastError === null ? null : redactSecrets(row.lastError),
        payload: row.payload,
        headers: row.headers,
        availableAt: row.availableAt.getTime(),
        sentAt: row.sentAt ? row.sentAt.getTime() : null,
        history: history.map((a) => ({ ...a, error: redactSecrets(a.error) })),
      };
    });
  }

  /**
   * Makes dead messages pending again — the given message ids, those a filter matches, or all dead messages when
   * called without (or with `{}`) — with their attempts reset, due at once; only dead messages are touched. A
   * requeued message keeps its place in its key's order. A message id requeues every dead row of that message (one
   * per destination; filter by `destination` for one). Resolves with the number of rows requeued and wakes the
   * publisher.
   * While someone watches the publisher's `requeued` event (metrics do), the rows are counted per pattern in the
   * same transaction and the event reports them.
   */
  async requeue(selection?: readonly string[] | DeadLetterFilter): Promise<number> {
    const ids = this.checkSelection('requeue', selection);
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

  /**
   * Deletes dead messages, with their attempt history — the given message ids, those a filter matches, or all when
   * called without (or with `{}`). Resolves with the number deleted.
   */
  async purge(selection?: readonly string[] | DeadLetterFilter): Promise<number> {
    const ids = this.checkSelection('purge', selection);
    const { dataSource, dialect, table } = this.database;
    const count = await runOnConnection(dataSource, (m) => dialect.purgeDead(m, table, ids));
    if (count > 0) this.publisher.wake();
    return count;
  }

  private checkSelection(method: string, selection: readonly string[] | DeadLetterFilter | undefined) {
    if (selection === undefined) return undefined;
    if (Array.isArray(selection) || typeof selection !== 'object' || selection === null) {
      return checkIds(method, selection);
    }
    return checkFilter(method, selection);
  }
}

function toSummary(row: DeadRow): DeadLetterSummary {
  return {
    messageId: row.messageId,
    pattern: row.pattern,
    key: row.key,
    destination: row.destination,
    attempts: row.attempts,
    createdAt: row.createdAt,
    deadAt: row.deadAt === 0 ? null : row.deadAt,
    lastError: row.lastError === null ? null : redactSecrets(row.lastError),
  };
}
