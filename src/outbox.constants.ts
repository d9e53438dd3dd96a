/** Injection token of the validated, defaults-applied module options (`ResolvedOutboxOptions`). */
export const OUTBOX_OPTIONS = Symbol('nestjs-outbox:options');
/** Injection token of the TypeORM `DataSource` the outbox writes to. */
export const OUTBOX_DATA_SOURCE = Symbol('nestjs-outbox:data-source');
/** Name under which the publisher's loop is registered in `SchedulerRegistry`. */
export const OUTBOX_PUBLISHER_JOB = 'nestjs-outbox:publisher';
/** Default table of outbox rows. */
export const OUTBOX_TABLE = 'outbox_messages';
/** Header that carries the message id on transports with headers. */
export const MESSAGE_ID_HEADER = 'x-message-id';
