/**
 * The public API of nestjs-outbox, grouped by role. Everything exported here is a promise to keep: the reviewed
 * report of it lives in etc/nestjs-outbox.api.md and CI fails when the two differ (`npm run api:update` after a
 * deliberate change). Helpers for an app's tests are in `nestjs-outbox/testing`.
 */

// ── Module and options ────────────────────────────────────────────────────────────────────────────────────────
/** `OutboxModule.forRoot()` / `forRootAsync()`: the outbox, its publisher, cleanup and idempotency keys. */
export { OutboxModule } from './outbox.module';
/** What `forRoot()` takes; each option is documented where it is declared, with its default. */
export type {
  OutboxModuleOptions,
  OutboxModuleExtras,
  OutboxPublisherOptions,
  OutboxRetryOptions,
  OutboxCleanupOptions,
  OutboxTransportName,
  OutboxCloudEventsOptions,
} from './outbox.options';
/** The `route` option: several brokers, one picked per message. */
export type { OutboxRoute, OutboxRouteMessage } from './publisher/destinations/outbox-route.types';
/** What `forRoot()` and `forRootAsync()` take, extras (`isGlobal`, `dataSource`) included. */
export type { OutboxModuleRootOptions, OutboxModuleAsyncOptions } from './outbox.module-definition';
/** Several outboxes, one per DataSource: inject a named one's `OutboxService` (or another of its providers). */
export { InjectOutbox, getOutboxServiceToken } from './outbox/inject-outbox.decorator';
export { getOutboxToken } from './outbox.constants';
/** The job names, NOTIFY channel and advisory lock class of one outbox (`OutboxPublisher.resourceNames`). */
export type { OutboxResourceNames } from './scheduling/outbox-resource-names';
/** The module-wide `idempotency` defaults, and what `@Idempotent()` takes per handler. */
export type { IdempotencyDefaults, IdempotentOptions } from './idempotency/idempotency.options';

// ── Tables: entities for the DataSource, migrations to create them ───────────────────────────────────────────
export { OutboxMessage } from './schema/outbox-message.entity';
export type { OutboxMessageStatus } from './schema/outbox-message.entity';
export { OutboxKeyLock } from './schema/outbox-key-lock.entity';
export { IdempotencyRecord } from './schema/idempotency-record.entity';
export { IdempotencyStep } from './schema/idempotency-step.entity';
/** Every shipped migration, oldest first: `migrations: [...OUTBOX_MIGRATIONS, …]`; each one is exported too. */
export { OUTBOX_MIGRATIONS } from './schema/migrations';
export { CreateOutboxTables1764374400000 } from './schema/migrations/1764374400000-outbox-tables';
export { CreateIdempotencyKeys1764460800000 } from './schema/migrations/1764460800000-idempotency-keys';
export { OutboxAttempt, OUTBOX_ATTEMPTS_TABLE } from './schema/outbox-attempt.entity';
export { AddOutboxAttempts1765152000000 } from './schema/migrations/1765152000000-outbox-attempts';
export { CreateIdempotencySteps1765411200000 } from './schema/migrations/1765411200000-idempotency-steps';
export { AddOutboxDestinations1765497600000 } from './schema/migrations/1765497600000-outbox-destinations';
export { IdempotencyExpiryBrin1765584000000 } from './schema/migrations/1765584000000-idempotency-expiry-brin';
/** One outbox's own table names (`tables` of `forRoot()`): its entities and migrations under those names. */
export { outboxEntities } from './schema/outbox-entities';
export { outboxMigrations } from './schema/migrations';
export type { OutboxTableNames, OutboxTablesOptions } from './schema/outbox-table-names';
/** The columns shared by the shipped entities and those of `outboxEntities()`. */
export { OutboxMessageColumns } from './schema/outbox-message.entity';
export { OutboxAttemptColumns } from './schema/outbox-attempt.entity';
export { OutboxKeyLockColumns } from './schema/outbox-key-lock.entity';
export { IdempotencyRecordColumns } from './schema/idempotency-record.entity';
export { IdempotencyStepColumns } from './schema/idempotency-step.entity';

// ── Producing: the business write and its event in one transaction ───────────────────────────────────────────
/** `transaction()`, `emit()`, `emitMany()`, `manager`, `stats()`, `flush()`. */
export { OutboxService } from './outbox/outbox.service';
export type { EmitManyEvent, EmitManyOptions, EmitOptions } from './outbox/outbox.service';
export type { OutboxTransactionOptions } from './transaction/transaction.types';

// ── Consuming: handlers applied once per key or message ──────────────────────────────────────────────────────
/** Guards an HTTP handler (`Idempotency-Key`) or a message handler (the outbox's message id). */
export { Idempotent } from './idempotency/idempotent.decorator';
/** A recovery point for an external call inside an idempotent handler: runs once per key, resumed on retry. */
export { idempotentStep } from './idempotency/steps/idempotent-step';
export {
  IdempotentStepOutsideCallError,
  IdempotentStepNameError,
  IdempotentStepResultError,
  IdempotentStepOrderError,
} from './idempotency/steps/step.errors';
/** The request's idempotency key, as a handler parameter. */
export { IdempotencyKey } from './idempotency/idempotency-key.decorator';
/** The header that marks a replayed response (`Idempotent-Replayed: true`). */
export { IDEMPOTENT_REPLAYED_HEADER } from './idempotency/idempotency.options';
/** The outbox message id of an incoming message (RabbitMQ, NATS, MQTT, Kafka headers or the TCP/Redis envelope). */
export { getOutboxMessageId } from './transports/incoming-message-id';
/** Unwraps the envelope that carries the message id on TCP and Redis (`deserializer:` of the consumer). */
export { OutboxEnvelopeDeserializer } from './transports/outbox-envelope.deserializer';
/** Runs a provider method for each outbox message of a pattern, after the commit, once, in its own transaction. */
export { OnOutboxEvent } from './handlers/on-outbox-event.decorator';
export type { OnOutboxEventOptions } from './handlers/on-outbox-event.decorator';
export type { OutboxEventContext } from './handlers/outbox-event-context';
/** Runs a message handler in a CONSUMER span, child of the span active at `emit()`. */
export { OutboxTraceInterceptor } from './tracing/outbox-trace.interceptor';

// ── Operating: the relay, its events, dead letters, health, cleanup ──────────────────────────────────────────
/** The relay: `flush()`, `on(event, listener)`. */
export { OutboxPublisher } from './publisher/outbox-publisher';
export type { OutboxPassResult } from './publisher/publish-pass';
/** The relay's events, on `publisher.on()` and on `node:diagnostics_channel` (`OUTBOX_CHANNELS`). */
export { OUTBOX_CHANNELS } from './events/outbox-channels';
export type {
  OutboxPublisherEvents,
  OutboxPublishedEvent,
  OutboxRetryEvent,
  OutboxDeadEvent,
  OutboxLeaseLostEvent,
} from './events/publisher-events';
/** What `OutboxService.stats()` counts. */
export type { OutboxStats } from './dialects/outbox-dialect';
/** List, requeue and purge dead messages. */
export { OutboxDeadLetters } from './outbox/outbox-dead-letters.service';
export type { ListDeadOptions } from './outbox/outbox-dead-letters.service';
export type {
  DeadLetterFilter,
  DeadLetterTime,
  DeadLetterPageQuery,
  DeadLetterPage,
  DeadLetterSummary,
  OutboxMessageDetail,
  OutboxDestinationState,
  OutboxAttemptRecord,
} from './outbox/dead-letter.model';
/** A `@nestjs/terminus` indicator of the backlog and the relay's lag. */
export { OutboxHealthIndicator } from './health/outbox-health.indicator';
export type { OutboxHealthThresholds, OutboxHealthDetails } from './health/outbox-health.indicator';
/** The cleanup loop (`runOnce()`), and the registry an app adds its own cleanup tasks to. */
export { OutboxCleanupScheduler } from './cleanup/outbox-cleanup.scheduler';
export { OutboxCleanupRegistry } from './scheduling/outbox-cleanup.registry';
export type { OutboxCleanupTask } from './scheduling/outbox-cleanup.registry';
/** A web page and JSON API to watch the backlog and lag and to requeue or purge dead letters (docs/console.md). */
export { OutboxConsoleModule } from './console/outbox-console.module';
export type { OutboxConsoleOptions } from './console/console.options';

// ── Errors: each names what was wrong and the fix ────────────────────────────────────────────────────────────
export * from './errors';
/** The RFC 9457 problem an idempotent HTTP handler answers with (400, 409, 422, 503), and its body. */
export { IdempotencyProblemException } from './idempotency/idempotency.problems';
export type { IdempotencyProblemDetails } from './idempotency/idempotency.problems';
/** Whether an error means the database could not be reached (the interceptor's 503). */
export { isDatabaseUnavailable } from './idempotency/database-unavailable';

// ── Extension points ─────────────────────────────────────────────────────────────────────────────────────────
/** Extend it and override a `protected` step; apply it with `SetMetadata(IDEMPOTENT_OPTIONS, …)`. */
export { IdempotencyInterceptor } from './idempotency/idempotency.interceptor';
export { IdempotencySteps } from './idempotency/idempotency-steps.base';
export type {
  ResolvedIdempotentOptions,
  StoredResponse,
  IdempotentCall,
  HandlerBody,
} from './idempotency/idempotent-call.types';
export { IDEMPOTENT_OPTIONS } from './idempotency/idempotency.constants';
/** Sends the problems as `application/problem+json`; `@Idempotent()` applies it, a custom decorator can too. */
export { IdempotencyProblemFilter } from './idempotency/idempotency-problem.filter';
/** Plug another transaction owner in (`transactions:` option); nestjs-cls's adapter is built in. */
export type { OutboxTransactionSource, OutboxTransactionContext } from './transaction/transaction.types';
export { ClsTransactionSource } from './transaction/cls-transaction-source';
export type { ClsTransactionSourceOptions } from './transaction/cls-transaction-source';

// ── Observability: OpenTelemetry metrics (the `metrics` option) and the relay's events they read ──────────────
/** The relay's metrics provider, the meter's name and its instruments' names (see docs/observability.md). */
export { OutboxMetrics } from './observability/outbox-metrics';
export { OUTBOX_METER, OUTBOX_METRICS } from './observability/metric-names';
export type { OutboxMetricsOptions, OutboxMeterProviderLike } from './outbox.options';
export type { OutboxEventPayload, OutboxPublishedMessage, OutboxRequeuedEvent } from './events/publisher-events';
/** `@Idempotent()` outcomes on `node:diagnostics_channel` (what `outbox.idempotency.requests` counts). */
export { OUTBOX_IDEMPOTENCY_CHANNEL } from './events/idempotency-channel';
export type { OutboxIdempotencyEvent, IdempotencyOutcome } from './events/idempotency-channel';

// Types that appear in the `protected` steps of the extensible classes (OutboxPublisher, IdempotencyInterceptor):
// exported so that a subclass can name them. Types only. The internals those classes hold (the database hub, the
// idempotency service) stay unexported on purpose: the API report lists them as forgotten exports.
export type { ResolvedOutboxOptions } from './outbox.options';
export type { IdempotencyAttempt, StoredIdempotencyRecord } from './idempotency/idempotency-store';
export type { ClaimedOutboxRow, NewOutboxRow, OutboxFailure } from './dialects/outbox-dialect';
export type { ClaimedBatch, BatchOutcome } from './publisher/publish-pass';
export type { OutgoingOutboxMessage } from './transports/outbox-transport';
