import type { EntityManager } from 'typeorm';
import type { OutboxDatabase } from '../dialects/outbox-database';
import { OutboxHandlerInFlightError, OutboxInvalidMessageError } from '../errors';
import { boundedText } from '../idempotency/fingerprint';
import { trackHandlerStart } from '../idempotency/call-marks';
import type { IdempotencyService } from '../idempotency/idempotency.service';
import { currentTransaction } from '../transaction/transaction-context';
import { transactionSourceOf } from '../transaction/transaction-source.registry';

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

/**
 * `OutboxService.once()`: runs `work` in a transaction with the deduplication record of (scope, messageId), taken
 * and recorded by `idempotency` as an `@Idempotent()` message handler's; resolves whether it ran.
 */
export async function runOnce(
  database: OutboxDatabase,
  idempotency: IdempotencyService | undefined,
  messageId: string,
  work: (manager: EntityManager) => Promise<unknown>,
  options: OnceOptions,
): Promise<boolean> {
  const { scope, key, ttl } = onceArguments(database, idempotency, messageId, work, options);
  if (!idempotency) {
    throw new OutboxInvalidMessageError(
      'once() needs the IdempotencyService of OutboxModule: get OutboxService from the app, not with new.',
    );
  }
  const begun = await idempotency.begin(scope, key, ONCE_FINGERPRINT, idempotency.defaults, { ttl });
  if (begun.kind === 'stored') return false;
  if (begun.kind === 'in-flight') {
    throw new OutboxHandlerInFlightError(
      `once(): message ${JSON.stringify(messageId)} of scope ${JSON.stringify(scope)} is being handled in another ` +
        'transaction right now. Redeliver it later (nack and requeue); it is skipped then if that run committed.',
    );
  }
  const { attempt } = begun;
  try {
    // What `work` emits records the record as its cause (`trace()`).
    const cause = { dataSource: idempotency.dataSourceName, scope, key };
    await attempt.run(() => trackHandlerStart({ started: true, cause }, () => work(attempt.context.manager)));
  } catch (error) {
    await attempt.rollback().catch(() => undefined);
    throw error;
  }
  return attempt.commit({ fingerprint: ONCE_FINGERPRINT, status: null, body: null, headers: null, ttl });
}

/** `once()`'s arguments, checked: the stored scope and key (hashed beyond 255 characters) and the ttl. */
function onceArguments(
  database: OutboxDatabase,
  idempotency: IdempotencyService | undefined,
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
  const ttl = options.ttl ?? idempotency?.defaults.ttl;
  if (typeof ttl !== 'number' || !Number.isFinite(ttl) || ttl <= 0) {
    throw new OutboxInvalidMessageError(
      `once('${messageId}') option ttl must be a number of milliseconds > 0 (how long the record is kept).`,
    );
  }
  if (currentTransaction(database.dataSource) && !transactionSourceOf(database.dataSource)) {
    throw new OutboxInvalidMessageError(
      `once('${messageId}') was called inside a transaction: it opens its own, with the record. Call it outside ` +
        'outbox.transaction(), and do the work inside it.',
    );
  }
  return { scope: boundedText(options.scope), key: boundedText(messageId), ttl };
}

/** What a wrong argument was, for an error message. */
function describeArgument(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return JSON.stringify(value.slice(0, 40));
  return typeof value;
}
