import { Inject, Injectable, Optional } from '@nestjs/common';
import { OutboxInvalidMessageError } from '../errors';
import { OUTBOX_OPTIONS } from '../outbox.constants';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { editAndRequeue } from './dead-letter-edit';
import type { DeadLetterEdit, DeadLetterEditResult } from './dead-letter-edit.types';
import { readMessageDetail } from './dead-letter-detail';
import type { DeadRow, DeadRowFilter, DeadRowPosition, DeadSelection } from '../dialects/outbox-dialect';
import { checkFilter, checkIds, checkLimit, decodeCursor, encodeCursor } from './dead-letter-query';
import { failureGroupOf } from './dead-letter-groups';
import { checkGroupFilter, scanDead, SCAN_CHUNK } from './dead-letter-scan';
import type {
  DeadLetterFilter,
  DeadLetterGroup,
  DeadLetterGroups,
  DeadLetterGroupsQuery,
  DeadLetterPage,
  DeadLetterPageQuery,
  DeadLetterSummary,
  OutboxMessageDetail,
} from './dead-letter.model';
import { OutboxRelayRegistry } from '../scheduling/outbox-relay.registry';
import { outsideTransactionContext } from '../transaction/transaction-context';
import { runInTransaction, runOnConnection } from '../transaction/transaction-runner';
import { redactSecrets } from '../util/redact-secrets';
import { OutboxDatabase } from '../dialects/outbox-database';
import type { OutboxMessage } from '../schema/outbox-message.entity';
import { dryRunDeadLetters } from './dead-letter-trial';
import type { DeadLetterDryRun, DeadLetterDryRunOptions } from './dead-letter-trial.types';

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

/** Most dead rows one `groups()` call reads (newest death first); it reports `complete: false` beyond. */
export const MAX_GROUP_SCAN = 100_000;

/**
 * Dead messages: those that exhausted `retry.maxAttempts` or failed with `OutboxNonRetryableError`. A dead message
 * still blocks later messages of its key (per-key order), until it is requeued or purged.
 *
 * ```ts
 * const { items, nextCursor } = await deadLetters.page({ pattern: 'OrderPlaced', errorContains: 'timeout' });
 * const one = await deadLetters.get(items[0].messageId);   // payload, headers, attempt history
 * await deadLetters.requeue({ pattern: 'OrderPlaced' });     // by filter; or ids; or requeue() for all
 * await deadLetters.purge(['…']);                            // or a filter; or purge() for all
 * const { groups } = await deadLetters.groups();              // by cause: error class, message, frame
 * await deadLetters.requeue({ group: groups[0].group });      // one cause's messages only
 * const trial = await deadLetters.dryRun({ group: groups[0].group }); // would they pass now? nothing is written
 * await deadLetters.editAndRequeue(id, { payload: fixed, reason: 'bad VAT id', actor: 'ops:ana' }); // opt-in
 * ```
 *
 * Every result is plain JSON (times in epoch milliseconds on the database clock), ready for an HTTP API.
 */
@Injectable()
export class OutboxDeadLetters {
  constructor(
    protected readonly database: OutboxDatabase,
    private readonly relays: OutboxRelayRegistry,
    @Optional() @Inject(OUTBOX_OPTIONS) private readonly options?: ResolvedOutboxOptions,
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
    const { filter: where, group } = checkGroupFilter('count', filter);
    const { dataSource, dialect, table } = this.database;
    if (group === undefined) return runOnConnection(dataSource, (m) => dialect.countDead(m, table, where));
    let count = 0;
    await runOnConnection(dataSource, (m) =>
      scanDead(this.database, m, where, undefined, (row) => {
        if (failureGroupOf(row.lastError).group === group) count++;
        return true;
      }),
    );
    return count;
  }

  /**
   * Dead messages grouped by cause — error class, message with numbers, UUIDs, long ids and quoted values replaced,
   * first application frame when the stored error has a stack — largest group first, with counts and first/last
   * death. Grouped exactly over the newest `MAX_GROUP_SCAN` (100 000) dead rows matching the filter; beyond that,
   * `complete` is false. Each group's `group` id selects its rows in `page`, `count`, `requeue` and `purge`.
   */
  async groups(query: DeadLetterGroupsQuery = {}): Promise<DeadLetterGroups> {
    const { limit: rawLimit, ...rest } = query ?? {};
    const filter = checkFilter('groups', { ...rest });
    const limit = checkLimit('groups', rawLimit, 100);
    const { dataSource } = this.database;
    const found = new Map<string, DeadLetterGroup & { byPattern: Map<string, number> }>();
    let scanned = 0;
    const complete = await runOnConnection(dataSource, (m) =>
      scanDead(this.database, m, filter, undefined, (row) => {
        if (scanned === MAX_GROUP_SCAN) return false;
        scanned++;
        const cause = failureGroupOf(row.lastError);
        let entry = found.get(cause.group);
        if (!entry) {
          // Rows come newest death first: the first row of a group is its newest.
          entry = {
            ...cause,
            count: 0,
            firstSeen: null,
            lastSeen: null,
            patterns: [],
            example: row.lastError === null ? null : redactSecrets(row.lastError),
            byPattern: new Map(),
          };
          found.set(cause.group, entry);
        }
        entry.count++;
        if (row.deadAt > 0) {
          entry.lastSeen = Math.max(entry.lastSeen ?? 0, row.deadAt);
          entry.firstSeen = Math.min(entry.firstSeen ?? row.deadAt, row.deadAt);
        }
        entry.byPattern.set(row.pattern, (entry.byPattern.get(row.pattern) ?? 0) + 1);
        return true;
      }),
    );
    const groups = [...found.values()]
      .sort((a, b) => b.count - a.count || (b.lastSeen ?? 0) - (a.lastSeen ?? 0) || a.group.localeCompare(b.group))
      .slice(0, limit)
      .map(({ byPattern, ...group }) => ({
        ...group,
        patterns: [...byPattern]
          .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
          .slice(0, 10)
          .map(([pattern]) => pattern),
      }));
    return { groups, scanned, complete };
  }

  /**
   * One page of dead messages matching the query's filter, newest death first (ties: newest written first). Pages
   * are keyset pages: pass `nextCursor` back as `cursor` (with the same filter) for the next one; each costs one
   * index range scan however deep it is, and walking the pages lists every message that stays dead exactly once,
   * while others die, are requeued or purged meanwhile (messages that die meanwhile sort before the first page).
   */
  async page(query: DeadLetterPageQuery = {}): Promise<DeadLetterPage> {
    const { limit: rawLimit, cursor, ...rest } = query ?? {};
    const { filter, group } = checkGroupFilter('page', { ...rest });
    const limit = checkLimit('page', rawLimit, 50);
    const after = decodeCursor('page', cursor);
    const { dataSource, dialect, table } = this.database;
    const rows =
      group === undefined
        ? await runOnConnection(dataSource, (m) => dialect.listDead(m, table, { filter, after, limit: limit + 1 }))
        : await this.scanGroup(filter, group, after, limit + 1);
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
   * given, else its first dead row, else its first unsent one, else its replaced one (an edited dead letter, with
   * `replacedBy` and the edit's audit), else its first; `destinations` lists them all.
   */
  get(messageId: string, destination?: string): Promise<OutboxMessageDetail | null> {
    return readMessageDetail(this.database, messageId, destination);
  }

  /**
   * Edit-and-requeue, opt-in (`deadLetters: { allowEdit: true }`, else `OutboxEditDisabledError`): replaces the
   * dead rows of a message (every one, or that of `edit.destination`) by a corrected copy — a new message id, the
   * edited payload and/or headers, the header `x-outbox-replaces` naming the original, pending and due at once, in
   * the original's place in its key's order (published before the later messages of its key it was blocking). The
   * original is kept unchanged with status `replaced` (never published, counted, requeued or edited again) and the
   * audit: who (`actor`), when, why (`reason`) and what changed, redacted; `get()` of either id shows it. Copy and
   * mark are one transaction of the outbox's DataSource; of concurrent edits of one message exactly one succeeds,
   * the others throw `OutboxNotDeadError` (as for a message that is not dead). An unknown id throws
   * `OutboxMessageNotFoundError`; a bad edit `OutboxEditInvalidError`. Call it outside any transaction.
   * See docs/dead-letters.md.
   */
  editAndRequeue(messageId: string, edit: DeadLetterEdit): Promise<DeadLetterEditResult> {
    return editAndRequeue(this.database, this.relays, this.options?.deadLetters.allowEdit === true, messageId, edit);
  }

  /** Whether `editAndRequeue()` is allowed (`deadLetters.allowEdit`): the console shows its Edit action only then. */
  get editAllowed(): boolean {
    return this.options?.deadLetters.allowEdit === true;
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
    const selections = await this.checkSelection('requeue', selection);
    const { dataSource, dialect, table } = this.database;
    const relay = this.relays.relay;
    let count = 0;
    if (!relay.isWatched('requeued')) {
      for (const ids of selections)
        count += await runOnConnection(dataSource, (m) => dialect.requeueDead(m, table, ids));
      if (count > 0) relay.wake();
      return count;
    }
    // Someone counts requeues (metrics, a listener): count them per pattern in the requeue's own transaction.
    const patterns = new Map<string, number>();
    for (const ids of selections) {
      const done = await outsideTransactionContext(() =>
        runInTransaction(dataSource, async (m) => ({
          patterns: await dialect.countDeadByPattern(m, table, ids),
          count: await dialect.requeueDead(m, table, ids),
        })),
      );
      count += done.count;
      for (const p of done.patterns) patterns.set(p.pattern, (patterns.get(p.pattern) ?? 0) + p.count);
    }
    if (count > 0) {
      relay.reportRequeued({ requeued: count, patterns: [...patterns].map(([pattern, n]) => ({ pattern, count: n })) });
      relay.wake();
    }
    return count;
  }

  /**
   * A dry run of `requeue()` on the same selection (ids, a filter with a `group`, or all): tries its newest `limit`
   * (100) dead rows as a requeue would deliver them now, and reports per row success or the new error (class and
   * redacted message, no stack). `@OnOutboxEvent()` handlers run one by one, each in a transaction that is always
   * rolled back (`context.dryRun` true); broker records are built and encoded as the relay would, never sent.
   * Nothing is written. Call it outside any transaction. See docs/dead-letters.md.
   */
  dryRun(
    selection?: readonly string[] | DeadLetterFilter,
    options?: DeadLetterDryRunOptions,
  ): Promise<DeadLetterDryRun> {
    return dryRunDeadLetters(this.database, this.relays, selection, options);
  }

  /**
   * Deletes dead messages, with their attempt history — the given message ids, those a filter matches, or all when
   * called without (or with `{}`). Resolves with the number deleted.
   */
  async purge(selection?: readonly string[] | DeadLetterFilter): Promise<number> {
    const selections = await this.checkSelection('purge', selection);
    const { dataSource, dialect, table } = this.database;
    let count = 0;
    for (const ids of selections) count += await runOnConnection(dataSource, (m) => dialect.purgeDead(m, table, ids));
    if (count > 0) this.relays.relay.wake();
    return count;
  }

  /**
   * What a requeue or purge applies to, as one or more selections run one after the other: ids, a filter, or all;
   * a failure group's rows (found by reading the filter's dead rows) in chunks of `SCAN_CHUNK`.
   */
  private async checkSelection(
    method: string,
    selection: readonly string[] | DeadLetterFilter | undefined,
  ): Promise<DeadSelection[]> {
    if (selection === undefined) return [undefined];
    if (Array.isArray(selection) || typeof selection !== 'object' || selection === null) {
      return [checkIds(method, selection)];
    }
    const { filter, group } = checkGroupFilter(method, selection);
    if (group === undefined) return [filter];
    const seqs: string[] = [];
    await runOnConnection(this.database.dataSource, (m) =>
      scanDead(this.database, m, filter, undefined, (row) => {
        if (failureGroupOf(row.lastError).group === group) seqs.push(row.seq);
        return true;
      }),
    );
    const chunks: DeadSelection[] = [];
    for (let i = 0; i < seqs.length; i += SCAN_CHUNK) chunks.push({ ...filter, seqs: seqs.slice(i, i + SCAN_CHUNK) });
    return chunks;
  }

  /** Up to `limit` dead rows of `group` matching `filter`, newest death first, after `after`. */
  private async scanGroup(
    filter: DeadRowFilter,
    group: string,
    after: DeadRowPosition | undefined,
    limit: number,
  ): Promise<DeadRow[]> {
    const rows: DeadRow[] = [];
    await runOnConnection(this.database.dataSource, (m) =>
      scanDead(this.database, m, filter, after, (row) => {
        if (failureGroupOf(row.lastError).group === group) rows.push(row);
        return rows.length < limit;
      }),
    );
    return rows;
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
