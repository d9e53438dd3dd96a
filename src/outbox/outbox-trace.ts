import type { EntityManager } from 'typeorm';
import type { OutboxDatabase } from '../dialects/outbox-database';
import { OutboxTraceQueryError } from '../errors';
import { boundedText } from '../idempotency/fingerprint';
import { runOnConnection } from '../transaction/transaction-runner';
import {
  DEFAULT_TRACE_DEPTH,
  type OutboxTrace,
  type OutboxTraceMessage,
  type OutboxTraceOptions,
  type OutboxTraceRecord,
  TRACE_MESSAGES_PER_CALL,
} from './outbox-trace.types';
import { emptyMessage, pairKey, TraceTables } from './outbox-trace.tables';

const MAX_DEPTH = 20;

/**
 * `OutboxService.trace()`: what request or message `id` caused in this database, level by level — the request's
 * record (in the scope asked) and the messages it emitted, or the message `id`; for each message its rows, failed
 * attempts and the records of the consumers that applied it, and what those emitted in turn, down to `depth`
 * levels. Read-only, with portable SQL (one statement per table and level), outside any transaction of the caller.
 */
export async function traceOutbox(
  database: OutboxDatabase,
  id: string,
  options: OutboxTraceOptions = {},
): Promise<OutboxTrace> {
  const { scope, depth, includeResponses } = checkedOptions(id, options);
  return runOnConnection(database.dataSource, (manager) =>
    new TraceReader(database, manager, includeResponses).read(id, scope, depth),
  );
}

function checkedOptions(id: unknown, options: OutboxTraceOptions): Required<OutboxTraceOptions> {
  if (typeof id !== 'string' || id.length === 0 || id.length > 255) {
    throw new OutboxTraceQueryError(
      'trace() needs an idempotency key or a message id: a string of 1 to 255 characters, got ' +
        `${typeof id === 'string' ? `${id.length} characters` : typeof id}.`,
    );
  }
  if (options === null || typeof options !== 'object') {
    throw new OutboxTraceQueryError('trace() options must be an object ({ scope?, depth?, includeResponses? }).');
  }
  const { scope = '', depth = DEFAULT_TRACE_DEPTH, includeResponses = false } = options;
  if (typeof scope !== 'string') {
    throw new OutboxTraceQueryError(
      `trace('${id}') option scope must be a string (the principal the key was recorded under), got ${typeof scope}.`,
    );
  }
  if (!Number.isInteger(depth) || depth < 1 || depth > MAX_DEPTH) {
    throw new OutboxTraceQueryError(
      `trace('${id}') option depth must be an integer from 1 to ${MAX_DEPTH} (levels of messages), got ${String(depth)}.`,
    );
  }
  return { scope: boundedText(scope), depth, includeResponses: includeResponses === true };
}

/** One trace's walk: level by level, reading through `TraceTables` on one manager. */
class TraceReader {
  private readonly tables: TraceTables;
  private truncated = false;
  /** Messages already placed in the tree (a cycle, or a message reached twice, is listed once). */
  private readonly seen = new Set<string>();

  constructor(database: OutboxDatabase, manager: EntityManager, includeResponses: boolean) {
    this.tables = new TraceTables(database, manager, includeResponses);
  }

  async read(id: string, scope: string, depth: number): Promise<OutboxTrace> {
    const request = await this.tables.requestRecord(id, scope);
    let message: OutboxTraceMessage | null = null;
    if (request) await this.followRecords([request], 1, depth);
    const [found] = await this.tables.messages([id]);
    if (found) {
      message = found;
    } else {
      // Not in this outbox: another service's message (or one deleted since) that consumers here applied.
      const consumers = await this.tables.consumerRecords([id]);
      if (consumers.length > 0) message = { ...emptyMessage(id), consumers };
    }
    if (message) {
      this.seen.add(id);
      await this.followMessages([message], 1, depth);
    }
    return { id, scope, request, message, depth, truncated: this.truncated };
  }

  /** Fills in each message's consumers (level `level`), then what they emitted, down to `depth`. */
  private async followMessages(messages: OutboxTraceMessage[], level: number, depth: number): Promise<void> {
    const inOutbox = messages.filter((m) => m.pattern !== null);
    const consumers = await this.tables.consumerRecords(inOutbox.map((m) => m.messageId));
    for (const message of inOutbox) message.consumers = consumers.filter((c) => c.key === message.messageId);
    await this.followRecords(
      messages.flatMap((m) => m.consumers),
      level + 1,
      depth,
    );
  }

  /** Fills in what each record emitted (messages of level `level`), when within `depth`. */
  private async followRecords(records: OutboxTraceRecord[], level: number, depth: number): Promise<void> {
    if (records.length === 0) return;
    const emitted = await this.emittedBy(records);
    if (level > depth) {
      if (emitted.length > 0) this.truncated = true;
      return;
    }
    const next: OutboxTraceMessage[] = [];
    for (const record of records) {
      const own = emitted.filter((m) => m.cause?.scope === record.scope && m.cause.key === record.key);
      record.emitted = own.filter((m) => !this.seen.has(m.messageId));
      for (const m of record.emitted) this.seen.add(m.messageId);
      next.push(...record.emitted);
    }
    if (next.length > 0) await this.followMessages(next, level, depth);
  }

  /** The messages the records emitted, at most `TRACE_MESSAGES_PER_CALL` per record. */
  private async emittedBy(records: OutboxTraceRecord[]): Promise<OutboxTraceMessage[]> {
    const messages = await this.tables.emittedBy(records);
    const perCall = new Map<string, number>();
    return messages.filter((m) => {
      const call = pairKey(m.cause!.scope, m.cause!.key);
      const count = (perCall.get(call) ?? 0) + 1;
      perCall.set(call, count);
      if (count > TRACE_MESSAGES_PER_CALL) this.truncated = true;
      return count <= TRACE_MESSAGES_PER_CALL;
    });
  }
}
