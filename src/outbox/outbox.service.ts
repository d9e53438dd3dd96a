import { Injectable, Optional } from '@nestjs/common';
import { getDataSourceName } from '@nestjs/typeorm';
import type { EntityManager } from 'typeorm';
import { OutboxDestinations } from '../destinations/outbox-destinations';
import { OutboxDatabase } from '../dialects/outbox-database';
import type { NewOutboxRow, OutboxStats } from '../dialects/outbox-dialect';
import { OutboxInvalidMessageError, OutboxNoTransactionError } from '../errors';
import { currentCause } from '../idempotency/call-marks';
import { IdempotencyService } from '../idempotency/idempotency.service';
import { OutboxRelayRegistry } from '../scheduling/outbox-relay.registry';
import { currentTransaction } from '../transaction/transaction-context';
import { runInTransaction, runOnConnection } from '../transaction/transaction-runner';
import type { OutboxTransactionOptions } from '../transaction/transaction.types';
import { duplicateIdError } from './duplicated-message-id';
import { type EmitManyEvent, type EmitManyOptions, emitManyRows, type EmitOptions, emitRow } from './emit-rows';
import { traceOutbox } from './outbox-trace';
import type { OutboxTrace, OutboxTraceOptions } from './outbox-trace.types';
import { type OnceOptions, runOnce } from './run-once';

/**
 * Writes events into the outbox in the caller's transaction, and opens transactions that make themselves
 * ambient for everything awaited inside them.
 */
@Injectable()
export class OutboxService {
  constructor(
    protected readonly database: OutboxDatabase,
    private readonly destinations: OutboxDestinations,
    private readonly relays: OutboxRelayRegistry,
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
    return runOnce(this.database, this.idempotency, messageId, work, options);
  }

  /**
   * Writes one event into the outbox table, in the transaction of `options.manager` or else the ambient one.
   * Resolves with the message id. Throws `OutboxNoTransactionError` when there is neither — an event written
   * outside the business transaction is exactly the bug an outbox exists to prevent.
   */
  async emit(pattern: string, payload: unknown, options: EmitOptions = {}): Promise<string> {
    const row = emitRow(pattern, payload, options, currentCause(this.database.name));
    const manager = this.writeManager(`emit('${pattern}')`, options.manager);
    try {
      await this.database.dialect.insert(manager, this.database.table, this.perDestination([row]));
    } catch (error) {
      throw duplicateIdError(this.database, `emit('${pattern}')`, [row.messageId], error) ?? error;
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
    const rows = emitManyRows(events, options, currentCause(this.database.name));
    const manager = this.writeManager(`emitMany(${rows.length} events)`, options.manager);
    if (rows.length === 0) return [];
    try {
      await this.database.dialect.insert(manager, this.database.table, this.perDestination(rows));
    } catch (error) {
      const duplicate = duplicateIdError(
        this.database,
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
   * `OutboxDestinations.destinationsOf()`); the message itself when it is one row for every destination.
   */
  private perDestination(messages: NewOutboxRow[]): NewOutboxRow[] {
    const rows: NewOutboxRow[] = [];
    for (const message of messages) {
      const destinations = this.destinations.destinationsOf(message);
      if (destinations.length === 1 && destinations[0] === '') rows.push(message);
      else for (const destination of destinations) rows.push({ ...message, destination });
    }
    return rows;
  }

  /** The manager a write goes through: `given` (checked), else the ambient transaction's; throws when neither. */
  private writeManager(call: string, given: EntityManager | undefined): EntityManager {
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
  private wakeAfterCommit(manager: EntityManager): void {
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
   * What a request or a message caused in this database, as plain JSON: `id` is an idempotency key as the client
   * sent it (found only in `options.scope`, the principal it was recorded under: '' by default) or a message id.
   * The request's record (state, response status, steps, times — never the stored response unless
   * `includeResponses`), every message it emitted (pattern, destinations with state, attempts and errors), the
   * records of the consumers here that applied each message (`outbox-handler:<name>` for `@OnOutboxEvent()`
   * handlers, the consumer's scope for `@Idempotent()` message handlers and `once()`), and what those emitted in
   * turn, down to `options.depth` levels (4 by default). Read-only. See docs/observability.md.
   */
  trace(id: string, options?: OutboxTraceOptions): Promise<OutboxTrace> {
    return traceOutbox(this.database, id, options);
  }

  /**
   * True while this process's publisher waits for late broker confirms (see `OutboxPublisher.brokerSlow`); read by
   * the health indicator.
   */
  get brokerSlow(): boolean {
    return this.relays.relay.brokerSlow;
  }

  /** Runs publish passes now until nothing is due; resolves with the number of messages published. */
  flush(): Promise<number> {
    return this.relays.relay.flush();
  }

  private readonly wake = () => this.relays.relay.wake();
}
