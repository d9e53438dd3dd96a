import type { EntityManager } from 'typeorm';
import type { OutboxDatabase } from '../dialects/outbox-database';
import type { SqlDialectCore } from '../dialects/sql-dialect.core';
import { outboxAttemptsTable } from '../schema/outbox-attempt.entity';
import type {
  OutboxTraceDestination,
  OutboxTraceMessage,
  OutboxTraceRecord,
  OutboxTraceState,
} from './outbox-trace.types';

/** The prefix of an `@OnOutboxEvent()` handler's record scope (as `handlerScope()` writes it). */
const HANDLER_SCOPE = 'outbox-handler:';
/** Keys per `IN (…)` list: well under every database's bind-parameter limit. */
const IN_CHUNK = 500;

/**
 * The reads of a trace, one statement per table and level, in portable SQL (the dialect's quoting, parameters and
 * clock): outbox rows by message id or by cause, their failed attempts, idempotency records and their steps, each
 * turned into the plain JSON of `OutboxTrace`. `outbox-trace.ts` walks the tree with them.
 */
export class TraceTables {
  private readonly dialect: SqlDialectCore;

  constructor(
    private readonly database: OutboxDatabase,
    private readonly manager: EntityManager,
    private readonly includeResponses: boolean,
  ) {
    this.dialect = database.dialect as unknown as SqlDialectCore;
  }

  /** The record of request key `id` in `scope` (or its steps alone while it has not committed). */
  async requestRecord(id: string, scope: string): Promise<OutboxTraceRecord | null> {
    const rows = await this.records(`${this.q('scope')} = ${this.dialect.param(1)}`, [scope], [id]);
    const steps = await this.steps([{ scope, key: id }]);
    const record = rows[0] ?? (steps.size > 0 ? incomplete(scope, id) : null);
    if (record) record.steps = steps.get(pairKey(scope, id)) ?? [];
    return record;
  }

  /** The messages the records `records` emitted (found by their cause, in write order), with all their rows. */
  async emittedBy(records: OutboxTraceRecord[]): Promise<OutboxTraceMessage[]> {
    const keys = [...new Set(records.map((r) => r.key))];
    const rows = await this.inChunks(keys, (list, params) =>
      this.select(
        `SELECT ${this.q('message_id')}, ${this.q('cause_scope')}, ${this.q('cause_key')} ` +
          `FROM ${this.dialect.quoteTable(this.database.table)} WHERE ${this.q('cause_key')} IN (${list})`,
        params,
      ),
    );
    const wanted = new Set(records.map((r) => pairKey(r.scope, r.key)));
    const ids = [
      ...new Set(rows.filter((r) => wanted.has(pairKey(r.cause_scope, r.cause_key))).map((r) => r.message_id)),
    ];
    // Every row of those messages: a consumer's inbox row (its failed delivery, stored for retry) has the message's
    // id but no cause of its own.
    return this.messages(ids);
  }

  /** The messages of ids `ids` in this outbox (all their rows), in write order. */
  async messages(ids: string[]): Promise<OutboxTraceMessage[]> {
    const rows = await this.inChunks(ids, (list, params) =>
      this.select(
        `SELECT ${this.messageColumns()} FROM ${this.dialect.quoteTable(this.database.table)} ` +
          `WHERE ${this.q('message_id')} IN (${list}) ORDER BY ${this.q('seq')}`,
        params,
      ),
    );
    return this.toMessages(rows);
  }

  /** Groups rows by message id (in order of their first row), with each row's failed attempts. */
  private async toMessages(rows: any[]): Promise<OutboxTraceMessage[]> {
    const failures = await this.failures(rows.map((r) => String(r.seq)));
    const byId = new Map<string, OutboxTraceMessage>();
    for (const row of rows) {
      let message = byId.get(row.message_id);
      if (!message) {
        message = {
          messageId: row.message_id,
          pattern: row.pattern,
          key: row.ordering_key ?? null,
          state: null,
          cause: row.cause_key === null ? null : { scope: row.cause_scope ?? '', key: row.cause_key },
          createdAt: iso(row.created_at),
          destinations: [],
          consumers: [],
        };
        byId.set(row.message_id, message);
      }
      const state = rowState(row);
      message.destinations.push({
        destination: row.destination,
        state,
        attempts: Number(row.attempts),
        availableAt: iso(row.available_at),
        sentAt: iso(row.sent_at),
        deadAt: Number(row.dead_at) > 0 ? iso(row.dead_at) : null,
        expiresAt: iso(row.expires_at),
        lastError: row.last_error ?? null,
        failures: failures.get(String(row.seq)) ?? [],
      });
      message.state = worst(message.state, state);
    }
    return [...byId.values()];
  }

  /** The failed attempts of rows `seqs`, by seq, oldest first. */
  private async failures(seqs: string[]): Promise<Map<string, OutboxTraceDestination['failures']>> {
    const table = this.dialect.quoteTable(outboxAttemptsTable(this.database.table));
    const q = (c: string) => this.q(c);
    const rows = await this.inChunks(seqs, (list, params) =>
      this.select(
        `SELECT ${q('message_seq')}, ${q('attempt')}, ${q('failed_at')}, ${q('counted')}, ${q('error')} ` +
          `FROM ${table} WHERE ${q('message_seq')} IN (${list}) ORDER BY ${q('id')}`,
        params,
      ),
    );
    const bySeq = new Map<string, OutboxTraceDestination['failures']>();
    for (const row of rows) {
      const list = bySeq.get(String(row.message_seq)) ?? [];
      list.push({ attempt: Number(row.attempt), at: iso(row.failed_at), error: row.error, counted: flag(row.counted) });
      bySeq.set(String(row.message_seq), list);
    }
    return bySeq;
  }

  /**
   * The records of the consumers that applied the messages `ids`: keyed by the message id, with no HTTP status
   * (a request's record always has one, so no client's key of the same text is shown).
   */
  async consumerRecords(ids: string[]): Promise<OutboxTraceRecord[]> {
    const records = await this.records(`${this.q('response_status')} IS NULL`, [], ids);
    const steps = await this.steps(records);
    for (const record of records) record.steps = steps.get(pairKey(record.scope, record.key)) ?? [];
    return records;
  }

  /** The committed records of keys `keys` matching `where` (its parameters first). */
  private async records(where: string, whereParams: unknown[], keys: string[]): Promise<OutboxTraceRecord[]> {
    const entity = this.database.entities.idempotencyRecord;
    if (!this.database.dataSource.hasMetadata(entity)) return [];
    const table = this.dialect.quoteTable(this.database.dataSource.getMetadata(entity).tablePath);
    const q = (c: string) => this.q(c);
    const response = this.includeResponses ? `, ${q('response_body')}, ${q('response_headers')}` : '';
    const rows = await this.inChunks(
      keys,
      (list, params) =>
        this.select(
          `SELECT ${q('scope')}, ${q('idempotency_key')}, ${q('response_status')}, ${q('created_at')}, ` +
            `${q('expires_at')}, CASE WHEN ${q('expires_at')} <= ${this.dialect.nowMs} THEN 1 ELSE 0 END AS ` +
            `${q('expired')}${response} FROM ${table} WHERE ${where} AND ${q('idempotency_key')} IN (${list}) ` +
            `ORDER BY ${q('id')}`,
          [...whereParams, ...params],
        ),
      whereParams.length,
    );
    return rows.map((row) => ({
      kind: kindOf(row.scope, row.response_status),
      scope: row.scope,
      key: row.idempotency_key,
      state: flag(row.expired) ? 'expired' : 'completed',
      responseStatus: row.response_status === null ? null : Number(row.response_status),
      createdAt: iso(row.created_at),
      expiresAt: iso(row.expires_at),
      steps: [],
      ...(this.includeResponses ? { response: { body: row.response_body, headers: row.response_headers } } : {}),
      emitted: [],
    }));
  }

  /** The recorded steps of the calls `calls`, by (scope, key), in write order. */
  private async steps(calls: Array<{ scope: string; key: string }>): Promise<Map<string, OutboxTraceRecord['steps']>> {
    const bySession = new Map<string, OutboxTraceRecord['steps']>();
    const entity = this.database.entities.idempotencyStep;
    if (calls.length === 0 || !this.database.dataSource.hasMetadata(entity)) return bySession;
    const table = this.dialect.quoteTable(this.database.dataSource.getMetadata(entity).tablePath);
    const q = (c: string) => this.q(c);
    const rows = await this.inChunks([...new Set(calls.map((c) => c.key))], (list, params) =>
      this.select(
        `SELECT ${q('scope')}, ${q('idempotency_key')}, ${q('step')}, ${q('created_at')}, ${q('expires_at')} ` +
          `FROM ${table} WHERE ${q('idempotency_key')} IN (${list}) ORDER BY ${q('id')}`,
        params,
      ),
    );
    const wanted = new Set(calls.map((c) => pairKey(c.scope, c.key)));
    for (const row of rows) {
      const call = pairKey(row.scope, row.idempotency_key);
      if (!wanted.has(call)) continue; // another scope's key of the same text: never shown
      const list = bySession.get(call) ?? [];
      list.push({ name: row.step, createdAt: iso(row.created_at)!, expiresAt: iso(row.expires_at)! });
      bySession.set(call, list);
    }
    return bySession;
  }

  private messageColumns(): string {
    const columns = [
      'seq',
      'message_id',
      'pattern',
      'ordering_key',
      'destination',
      'status',
      'attempts',
      'available_at',
      'expires_at',
      'created_at',
      'sent_at',
      'claimed_until',
      'dead_at',
      'last_error',
      'cause_scope',
      'cause_key',
    ];
    const now = this.dialect.nowMs;
    const claimed = `CASE WHEN ${this.q('claimed_until')} > ${now} THEN 1 ELSE 0 END AS ${this.q('claimed')}`;
    return `${columns.map((c) => this.q(c)).join(', ')}, ${claimed}`;
  }

  /** Runs `query` for `values` in chunks, with `(?, ?, …)` lists numbered after `offset` parameters. */
  private async inChunks(
    values: string[],
    query: (list: string, params: unknown[]) => Promise<any[]>,
    offset = 0,
  ): Promise<any[]> {
    const rows: any[] = [];
    for (let start = 0; start < values.length; start += IN_CHUNK) {
      const chunk = values.slice(start, start + IN_CHUNK);
      const list = chunk.map((_, i) => this.dialect.param(offset + i + 1)).join(', ');
      rows.push(...(await query(list, chunk)));
    }
    return rows;
  }

  private async select(sql: string, params: unknown[]): Promise<any[]> {
    return (await this.dialect.execute(this.manager, sql, params)).records;
  }

  private q(column: string): string {
    return this.dialect.quote(column);
  }
}

function rowState(row: any): OutboxTraceState {
  if (row.status === 'sent' || row.status === 'dead' || row.status === 'replaced') return row.status;
  return flag(row.claimed) ? 'in-flight' : 'pending';
}

const SEVERITY: OutboxTraceState[] = ['replaced', 'sent', 'pending', 'in-flight', 'dead'];

/** The worse of two states (dead > in-flight > pending > sent > replaced). */
function worst(a: OutboxTraceState | null, b: OutboxTraceState): OutboxTraceState {
  return a === null || SEVERITY.indexOf(b) > SEVERITY.indexOf(a) ? b : a;
}

function kindOf(scope: string, status: unknown): OutboxTraceRecord['kind'] {
  if (status !== null && status !== undefined) return 'request';
  return scope.startsWith(HANDLER_SCOPE) ? 'handler' : 'consumer';
}

function incomplete(scope: string, key: string): OutboxTraceRecord {
  const base = { scope, key, responseStatus: null, createdAt: null, expiresAt: null };
  return { kind: 'request', ...base, state: 'incomplete', steps: [], emitted: [] };
}

/** A message known only by its id (not in this outbox). */
export function emptyMessage(messageId: string): OutboxTraceMessage {
  const base = { messageId, pattern: null, key: null, state: null, cause: null, createdAt: null };
  return { ...base, destinations: [], consumers: [] };
}

/** One string for a (scope, key) pair. */
export function pairKey(scope: string | null, key: string | null): string {
  return `${scope ?? ''}\u0000${key ?? ''}`;
}

/** Epoch milliseconds (a number, or a BIGINT as a string) as ISO 8601; null when absent. */
function iso(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  const ms = Number(value);
  return Number.isFinite(ms) ? new Date(ms).toISOString() : null;
}

function flag(value: unknown): boolean {
  return value === true || Number(value) === 1;
}
