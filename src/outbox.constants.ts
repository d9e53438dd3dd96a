import type { Type } from '@nestjs/common';

/** Injection token of the validated, defaults-applied module options (`ResolvedOutboxOptions`). */
export const OUTBOX_OPTIONS = Symbol('nestjs-outbox:options');
/** Injection token of the TypeORM `DataSource` the outbox writes to. */
export const OUTBOX_DATA_SOURCE = Symbol('nestjs-outbox:data-source');
/** Token of the name of the outbox's DataSource (`'default'` for the default one), as given to `forRoot()`. */
export const OUTBOX_DATA_SOURCE_NAME = Symbol('nestjs-outbox:data-source-name');
/** Token of the outbox's table names (`OutboxTableNames`, from the `tables` option of `forRoot()`). */
export const OUTBOX_TABLES = Symbol('nestjs-outbox:tables');
/** Name under which the publisher's loop is registered in `SchedulerRegistry`. */
export const OUTBOX_PUBLISHER_JOB = 'nestjs-outbox:publisher';
/** Default table of outbox rows. */
export const OUTBOX_TABLE = 'outbox_messages';
/** Header that carries the message id on transports with headers. */
export const MESSAGE_ID_HEADER = 'x-message-id';
/**
 * Header that names a message's cause (in its stored headers, so every transport and in-process handler gets it):
 * the key of the idempotency record of the call that emitted it — the client's idempotency key of a request, or the
 * id of the message whose handler emitted it. Absent on messages emitted outside an idempotent call.
 */
export const CAUSE_HEADER = 'x-outbox-cause';
/**
 * Header of a corrected copy of a dead letter (`OutboxDeadLetters.editAndRequeue()`): the id of the message it
 * replaces. Set by the library on every copy; an edit cannot set it.
 */
export const REPLACES_HEADER = 'x-outbox-replaces';

/** True for the unnamed DataSource (`undefined` or `'default'`, as `@nestjs/typeorm` names it). */
export function isDefaultDataSource(name: string | undefined): boolean {
  return name === undefined || name === 'default';
}

/**
 * Injection token of one of an outbox's exported providers (`OutboxService`, `OutboxDeadLetters`,
 * `OutboxHealthIndicator`, `OutboxPublisher`, `OutboxCleanupScheduler`, `OutboxCleanupRegistry`): the class itself
 * for the default DataSource, a string of its own for a named one — as `getDataSourceToken()` of `@nestjs/typeorm`.
 * `getOutboxToken(OutboxService, 'billing')` is what `@InjectOutbox('billing')` injects.
 *
 * ```ts
 * constructor(@Inject(getOutboxToken(OutboxDeadLetters, 'billing')) private readonly billingDeadLetters: OutboxDeadLetters) {}
 * ```
 */
export function getOutboxToken<T>(provider: Type<T>, dataSource?: string): Type<T> | string {
  return isDefaultDataSource(dataSource) ? provider : `nestjs-outbox:${dataSource}:${provider.name}`;
}
