import { Injectable, Optional } from '@nestjs/common';
import { getDataSourceName } from '@nestjs/typeorm';
import type { EntityManager } from 'typeorm';
import {
  OutboxDuplicateMessageIdError,
  OutboxHandlerInFlightError,
  OutboxInvalidMessageError,
  OutboxNoTransactionError,
} from '../errors';
import { MESSAGE_ID_HEADER } from '../outbox.constants';
import { OutboxPublisher } from '../publisher/outbox-publisher';
import { currentTransaction } from '../transaction/transaction-context';
import type { NewOutboxRow, OutboxStats } from '../dialects/outbox-dialect';
import { runInTransaction, runOnConnection } from '../transaction/transaction-runner';
import type { OutboxTransactionOptions } from '../transaction/transaction.types';
import { newMessageId } from './new-message-id';
import { OutboxDatabase } from '../dialects/outbox-database';
import { indexNamesOf, tableNameOf } from '../schema/outbox-table-names';
import { serializeJson } from './serialize-json';
import { duplicatedId } from './duplicated-message-id';
import { currentTraceHeaders } from '../util/opentelemetry';
import { IdempotencyService } from '../idempotency/idempotency.service';
import { boundedText } from '../idempotency/call-scope';
import { transactionSourceOf } from '../transaction/transaction-source.registry';

/** Options of one `emit()`. */
export interface EmitOptions {
  /** Write through this manager (its transaction) instead of the ambient one. */
  manager?: EntityManager;
  /** Ordering key: messages with the same key are published in commit order. Up to 255 characters. */
  key?: string;
  /** Extra headers sent with the message (string values). */
  headers?: Record<string, string>;
  /** Publish no earlier than this time. */
  availableAt?: Date;
  /** Publish no earlier than this many milliseconds after the commit's database time. */
  delay?: number;
  /** The message id to use instead of a new UUIDv7 (up to 255 characters, unique in the outbox). */
  messageId?: string;
}

/** One event of `emitMany()`. */
export interface EmitManyEvent {
  /** The pattern the consumer's `@EventPattern()` listens to. */
  pattern: string;
  /** The event's data (JSON-serializable). */
  payload: unknown;
  /** The options `emit()` takes, except `manager` (give it once, as `emitMany()`'s second argument). */
  options?: Omit<EmitOptions, 'manager'>;
}

/** Options of one `emitMany()` call. */
export interface EmitManyOptions {
  /** Write through this manager (its transaction) instead of the ambient one. */
  manager?: EntityManager;
}

/** Options of one `once()` call. */
export interface OnceOptions {
  /**
   * Who deduplicates: records are unique per (scope, message id), so two consumers of one message each run once.
   * Required; a stable name of the consumer, e.g. `'billing.order-placed'`. Give the scope an `@Idempotent()`
   * handler records under (`'ControllerName.methodName'`) to share its records. Up to 255 characters (longer scopes
   * are hashed, as `@Idempotent()` hashes them).
   */
  scope: string;
  /** Milliseconds the record is kept (the dedup window). Default: the module's `idempotency.ttl` (24 h). */
  ttl?: number;
}

/** Stored as the fingerprint of the records `once()` writes (it has no request data to compare). */
const ONCE_FINGERPRINT = 'once';

const MAX_TEXT = 255;

/**
 * Writes events into the outbox in the caller's transaction, and opens transactions that make themselves
 * ambient for everything awaited inside them.
 */
@Injectable()
export class OutboxService {
  constructor(
    protected readonly database: OutboxDatabase,
    protected readonly publisher: OutboxPublisher,
    @Optional() protected readonly idempotency?: IdempotencyService,
  ) {}

  /**
   * The name of the outbox's TypeORM DataSource: `'default'` for the default one, else the name given to
   * `OutboxModule.forRoot({ dataSource })`. Metrics (`outbox.data_source`), the console and the health keys use it.
   */
  get dataSourceName(): string {
    return this.database.name;
  }

  /**
   * Runs `work` in a transaction of the outbox's DataSource, ambient for everything it awaits: `emit()`,
   * `manager` and nested `transaction()` calls join it. Commits when `work` resolves, rolls back when it throws.
   * After a commit that wrote outbox rows, the local publisher is woken at once.
   */
  transaction<T>(work: (manager: EntityManager) => Promise<T>, options?: OutboxTransactionOptions): Promise<T> {
    return runInTransaction(this.database.dataSource, work, options);
  }

  /** The ambient transaction's EntityManager. Throws `OutboxNoTransactionError` outside a transaction. */
  get manager(): EntityManager {
    const context = currentTransaction(this.database.dataSource);
    if (!context) {
      throw new OutboxNoTransactionError(
        'OutboxService.manager was read outside a transaction. Read it inside outbox.transaction(async () => …) ' +
          'or inside a handler guarded by @Idempotent().',
      );
    }
    return context.manager;
  }

  /** True when called inside a transaction of the outbox's DataSource. */
  get inTransaction(): boolean {
    return currentTransaction(this.database.dataSource) !== undefined;
  }

  /**
   * Runs `work` at most once per (`scope`, `messageId`): in a transaction of the outbox's DataSource together with
   * the deduplication record of (scope, messageId) — the records, unique constraint and store of the `@Idempotent()`
   * message handlers, taken the way they take a message's key. Resolves true when `work` ran and committed with the
   * record; false when the record was already committed (a duplicate: `work` is not called), or when another delivery
   * committed it first (this run is rolled back). `work` gets the transaction's manager; `manager`, `emit()` and
   * `transaction()` join it. When `work` throws, everything rolls back, the record too, and the error is rethrown:
   * a redelivery runs it again. When another transaction holds the record right now (the same message in flight
   * elsewhere; on PostgreSQL after waiting up to `idempotency.lockTimeout`), it rejects with
   * `OutboxHandlerInFlightError`: redeliver later (nack/requeue), and the redelivery is skipped if that run committed.
   */
  async once(
    messageId: string,
    work: (manager: EntityManager) => Promise<unknown>,
    options: OnceOptions,
  ): Promise<boolean> {
    const { scope, key, ttl } = this.onceArguments(messageId, work, options);
    const idempotency = this.idempotency;
    if (!idempotency) {
      throw new OutboxInvalidMessageError(
        'once() needs the IdempotencyService of OutboxModule: get OutboxService from the app, not with new.',
      );
    }
    const begun = await idempotency.claim(scope, key, ONCE_FINGERPRINT, ttl);
    if (begun.kind === 'stored') return false;
    if (begun.kind === 'in-flight') {
      throw new OutboxHandlerInFlightError(
        `once(): message ${JSON.stringify(messageId)} of scope ${JSON.stringify(scope)} is being handled in another ` +
          'transaction right now. Redeliver it later (nack and requeue); it is skipped then if that run committed.',
      );
    }
    const { attempt } = begun;
    try {
      await attempt.run(() => work(attempt.context.manager));
    } catch (error) {
      await attempt.rollback().catch(() => undefined);
      throw error;
    }
    return attempt.commit({ fingerprint: ONCE_FINGERPRINT, status: null, body: null, headers: null, ttl });
  }

  /** `once()`'s arguments, checked: the stored scope and key (hashed beyond 255 characters) and the ttl. */
  private onceArguments(
    messageId: unknown,
    work: unknown,
    options: OnceOptions | undefined,
  ): { scope: string; key: string; ttl: number } {
    if (typeof messageId !== 'string' || messageId.length === 0) {
      throw new OutboxInvalidMessageError(
        `once() needs the message's id as its first argument: a non-empty string, got ${describeArgument(messageId)}. ` +
          "Pass the id the message carries (getOutboxMessageId(data, context) for the outbox's messages).",
      );
    }
    if (typeof work !== 'function') {
      throw new OutboxInvalidMessageError(
        `once('${messageId}') needs work as its second argument: async (manager) => …, got ${describeArgument(work)}.`,
      );
    }
    if (options === null || typeof options !== 'object') {
      throw new OutboxInvalidMessageError(
        `once('${messageId}') needs { scope } as its third argument: the consumer's name, e.g. ` +
          "once(id, work, { scope: 'billing.order-placed' }); records are unique per (scope, message id).",
      );
    }
    if (typeof options.scope !== 'string' || options.scope.length === 0) {
      throw new OutboxInvalidMessageError(
        `once('${messageId}') needs the scope option: a non-empty string naming the consumer, e.g. ` +
          `{ scope: 'billing.order-placed' }, got ${describeArgument(options.scope)}. Records are unique per ` +
          '(scope, message id), so two consumers of one message each run once.',
      );
    }
    const ttl = options.ttl ?? this.idempotency?.defaults.ttl;
    if (typeof ttl !== 'number' || !Number.isFinite(ttl) || ttl <= 0) {
      throw new OutboxInvalidMessageError(
        `once('${messageId}') option ttl must be a number of milliseconds > 0 (how long the record is kept).`,
      );
    }
    if (currentTransaction(this.database.dataSource) && !transactionSourceOf(this.database.dataSource)) {
      throw new OutboxInvalidMessageError(
        `once('${messageId}') was called inside a transaction: it opens its own, with the record. Call it outside ` +
          'outbox.transaction(), and do the work inside it.',
      );
    }
    return { scope: boundedText(options.scope), key: boundedText(messageId), ttl };
  }

  /**
   * Writes one event into the outbox table, in the transaction of `options.manager` or else the ambient one.
   * Resolves with the message id. Throws `OutboxNoTransactionError` when there is neither — an event written
   * outside the business transaction is exactly the bug an outbox exists to prevent.
   */
  async emit(pattern: string, payload: unknown, options: EmitOptions = {}): Promise<string> {
    const row = this.toRow(pattern, payload, options);
    const manager = this.writeManager(`emit('${pattern}')`, options.manager);
    try {
      await this.database.dialect.insert(manager, this.database.table, this.perDestination([row]));
    } catch (error) {
      throw this.duplicateIdError(`emit('${pattern}')`, [row.messageId], error) ?? error;
    }
    this.wakeAfterCommit(manager);
    return row.messageId;
  }

  /**
   * Writes many events into the outbox under the same rules as `emit()` (the transaction of `options.manager` or
   * else the ambient one; the same validation and errors), in one multi-row INSERT — split into as few statements
   * as the database's limits allow. Resolves with their message ids, in the order of `events`. Every event is
   * validated before anything is written; with `[]` nothing is written.
   */
  async emitMany(events: readonly EmitManyEvent[], options: EmitManyOptions = {}): Promise<string[]> {
    if (!Array.isArray(events)) {
      throw new OutboxInvalidMessageError(
        `emitMany() needs an array of { pattern, payload, options? }, got ${events === null ? 'null' : typeof events}.`,
      );
    }
    if (options === null || typeof options !== 'object') {
      throw new OutboxInvalidMessageError('emitMany() options must be an object ({ manager? }).');
    }
    const rows = events.map((event, i) => this.toManyRow(event, i));
    const ids = new Set<string>();
    for (const row of rows) {
      if (ids.has(row.messageId)) {
        throw new OutboxDuplicateMessageIdError(
          `emitMany(): the message id ${JSON.stringify(row.messageId)} is given to more than one event (message ` +
            'ids are unique; consumers deduplicate by them). Leave messageId out to get new UUIDv7s, or derive ' +
            'each from something unique to its event.',
          row.messageId,
        );
      }
      ids.add(row.messageId);
    }
    const manager = this.writeManager(`emitMany(${rows.length} events)`, options.manager);
    if (rows.length === 0) return [];
    try {
      await this.database.dialect.insert(manager, this.database.table, this.perDestination(rows));
    } catch (error) {
      const duplicate = this.duplicateIdError(
        'emitMany()',
        rows.map((r) => r.messageId),
        error,
      );
      throw duplicate ?? error;
    }
    this.wakeAfterCommit(manager);
    return rows.map((r) => r.messageId);
  }

  /**
   * The rows to write for `messages`: one per destination of each, all with its message id (see
   * `OutboxPublisher.destinationsOf()`); the message itself when it is one row for every destination.
   */
  protected perDestination(messages: NewOutboxRow[]): NewOutboxRow[] {
    const rows: NewOutboxRow[] = [];
    for (const message of messages) {
      const destinations = this.publisher.destinationsOf(message);
      if (destinations.length === 1 && destinations[0] === '') rows.push(message);
      else for (const destination of destinations) rows.push({ ...message, destination });
    }
    return rows;
  }

  /** The manager a write goes through: `given` (checked), else the ambient transaction's; throws when neither. */
  protected writeManager(call: string, given: EntityManager | undefined): EntityManager {
    if (!given) {
      const context = currentTransaction(this.database.dataSource);
      if (!context) {
        throw new OutboxNoTransactionError(
          `${call} was called outside a transaction, so the event could be published for a change that ` +
            'never committed (or lost for one that did). Call it inside outbox.transaction(async (manager) => …), inside a ' +
            'handler guarded by @Idempotent(), or pass { manager } of your own transaction.',
        );
      }
      return context.manager;
    }
    if (!given.queryRunner?.isTransactionActive) {
      throw new OutboxNoTransactionError(
        `${call} got a manager that is not in a transaction (e.g. dataSource.manager), so the event would ` +
          'commit on its own. Pass the manager that dataSource.transaction(async (manager) => …) hands you.',
      );
    }
    if (given.connection !== this.database.dataSource) {
      throw new OutboxInvalidMessageError(
        `${call} got a manager of DataSource '${getDataSourceName(given.connection.options as { name?: string })}', but the outbox lives in ` +
          `'${this.database.name}'. Pass a manager of the outbox's DataSource (or set OutboxModule's dataSource).`,
      );
    }
    return given;
  }

  /** Wakes the local publisher after the ambient transaction commits, when `manager` is that transaction's. */
  protected wakeAfterCommit(manager: EntityManager): void {
    const context = currentTransaction(this.database.dataSource);
    if (context && context.manager === manager && !context.afterCommit.includes(this.wake))
      context.afterCommit.push(this.wake);
  }

  /**
   * Counts of the outbox: pending, due now, in flight (claimed under a live lease), dead, and the age of the oldest
   * pending message (the relay's lag), all on the database clock. One indexed query.
   */
  stats(): Promise<OutboxStats> {
    const { dataSource, dialect, table } = this.database;
    return runOnConnection(dataSource, (m) => dialect.stats(m, table));
  }

  /**
   * True while this process's publisher waits for late broker confirms (see `OutboxPublisher.brokerSlow`); read by
   * the health indicator.
   */
  get brokerSlow(): boolean {
    return this.publisher.brokerSlow;
  }

  /** Runs publish passes now until nothing is due; resolves with the number of messages published. */
  flush(): Promise<number> {
    return this.publisher.flush();
  }

  private readonly wake = () => this.publisher.wake();

  /** `OutboxDuplicateMessageIdError` when `error` is a violation of the message-id unique index, else undefined. */
  protected duplicateIdError(
    call: string,
    messageIds: readonly string[],
    error: unknown,
  ): OutboxDuplicateMessageIdError | undefined {
    const { dialect, table } = this.database;
    const name = tableNameOf(table);
    const index = {
      name: indexNamesOf.messages(name).messageIdUnique,
      table: name,
      columns: ['message_id', 'destination'],
    };
    if (!dialect.isUniqueViolation(error, index)) return undefined;
    const messageId = messageIds.length === 1 ? messageIds[0] : duplicatedId(messageIds, error);
    const which =
      messageId === undefined
        ? `one of the ${messageIds.length} message ids`
        : `the message id ${JSON.stringify(messageId)}`;
    return new OutboxDuplicateMessageIdError(
      `${call}: ${which} is already in the outbox (message ids ` +
        'are unique; consumers deduplicate by them). Leave messageId out to get a new UUIDv7, or derive it from ' +
        'something unique to this event. Let this error roll the transaction back (on PostgreSQL the ' +
        'transaction is already aborted).',
      messageId ?? '',
    );
  }

  /** `toRow()` of the `index`-th event of `emitMany()`, errors naming the event. */
  protected toManyRow(event: EmitManyEvent, index: number) {
    if (event === null || typeof event !== 'object' || Array.isArray(event)) {
      throw new OutboxInvalidMessageError(
        `emitMany() event #${index} must be an object { pattern, payload, options? }, got ${event === null ? 'null' : typeof event}.`,
      );
    }
    const options = event.options ?? {};
    if (options !== null && typeof options === 'object' && 'manager' in options) {
      throw new OutboxInvalidMessageError(
        `emitMany() event #${index} has a manager option: give the manager once, as emitMany(events, { manager }).`,
      );
    }
    try {
      return this.toRow(event.pattern, event.payload, options);
    } catch (error) {
      if (error instanceof OutboxInvalidMessageError) error.message = `emitMany() event #${index}: ${error.message}`;
      throw error;
    }
  }

  protected toRow(pattern: string, payload: unknown, options: EmitOptions) {
    if (typeof pattern !== 'string' || pattern.trim().length === 0 || pattern.length > MAX_TEXT) {
      throw new OutboxInvalidMessageError(
        `emit() needs a pattern: a non-empty string of at most ${MAX_TEXT} characters, the one the consumer's ` +
          `@EventPattern() listens to. Got ${typeof pattern === 'string' ? JSON.stringify(pattern.slice(0, 40)) : typeof pattern}.`,
      );
    }
    if (options === null || typeof options !== 'object') {
      throw new OutboxInvalidMessageError(`emit('${pattern}') options must be an object.`);
    }
    const key = optionalText(pattern, 'key', options.key);
    const messageId = optionalText(pattern, 'messageId', options.messageId) ?? newMessageId();
    let headers: string | null = null;
    if (options.headers !== undefined) {
      const h = options.headers;
      if (typeof h !== 'object' || h === null || Array.isArray(h)) {
        throw new OutboxInvalidMessageError(`emit('${pattern}') option headers must be an object of string values.`);
      }
      for (const [name, value] of Object.entries(h)) {
        if (typeof value !== 'string') {
          throw new OutboxInvalidMessageError(
            `emit('${pattern}') header "${name}" must be a string, got ${typeof value}. Convert it with String().`,
          );
        }
        if (name.toLowerCase() === MESSAGE_ID_HEADER) {
          throw new OutboxInvalidMessageError(
            `emit('${pattern}') header "${name}" is reserved for the message id. Use the messageId option.`,
          );
        }
      }
      if (Object.keys(h).length > 0) headers = serializeJson(h, 'headers');
    }
    const trace = currentTraceHeaders(); // the active OpenTelemetry context, when the app traces
    if (trace) headers = serializeJson({ ...trace, ...options.headers }, 'headers');
    let availableAt: number | undefined;
    if (options.availableAt !== undefined) {
      if (!(options.availableAt instanceof Date) || Number.isNaN(options.availableAt.getTime())) {
        throw new OutboxInvalidMessageError(`emit('${pattern}') option availableAt must be a valid Date.`);
      }
      availableAt = options.availableAt.getTime();
    }
    if (
      options.delay !== undefined &&
      (typeof options.delay !== 'number' || !Number.isFinite(options.delay) || options.delay < 0)
    ) {
      throw new OutboxInvalidMessageError(`emit('${pattern}') option delay must be a number of milliseconds >= 0.`);
    }
    return {
      messageId,
      pattern,
      payload: serializeJson(payload, 'payload'),
      headers,
      key,
      availableAt,
      delay: options.delay,
    };
  }
}

/** What a wrong argument was, for an error message. */
function describeArgument(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return JSON.stringify(value.slice(0, 40));
  return typeof value;
}

function optionalText(pattern: string, name: string, value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_TEXT) {
    throw new OutboxInvalidMessageError(
      `emit('${pattern}') option ${name} must be a non-empty string of at most ${MAX_TEXT} characters.`,
    );
  }
  return value;
}
