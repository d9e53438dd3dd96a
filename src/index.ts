/**
 * The public API of nestjs-outbox, grouped by role. Everything exported here is a promise to keep: the reviewed
 * report of it lives in etc/nestjs-outbox.api.md and CI fails when the two differ (`npm run api:update` after a
 * deliberate change). Helpers for an app's tests are in `nestjs-outbox/testing`, the operator console in
 * `nestjs-outbox/console`.
 *
 * Types of options, events and results that are not exported by name stay reachable from the types that hold them:
 * `OutboxModuleOptions['retry']`, `OutboxPublisherEvents['dead']`, `Parameters<OutboxService['emit']>[2]`,
 * `Awaited<ReturnType<OutboxDeadLetters['page']>>`. Errors that are not exported by class are told apart by
 * `error.code` (`OutboxErrorCode`).
 */

// ── Module: import it once per DataSource; inject a named outbox's providers by token ────────────────────────
export { OutboxModule } from './outbox.module';
export type { OutboxModuleOptions } from './outbox.options';
export { InjectOutbox } from './outbox/inject-outbox.decorator';
export { getOutboxToken } from './outbox.constants';

// ── Tables: the entities for the DataSource and the migrations that create them ──────────────────────────────
export { OutboxMessage } from './schema/outbox-message.entity';
export { outboxEntities } from './schema/outbox-entities';
export { OUTBOX_MIGRATIONS, outboxMigrations } from './schema/migrations';

// ── Producing: the business write and its event in one transaction ───────────────────────────────────────────
export { OutboxService } from './outbox/outbox.service';

// ── Consuming: handlers applied once per key or message ──────────────────────────────────────────────────────
export { Idempotent } from './idempotency/idempotent.decorator';
export type { IdempotentOptions } from './idempotency/idempotency.options';
export { idempotentStep } from './idempotency/steps/idempotent-step';
export { IdempotencyKey } from './idempotency/call-marks';
export { IDEMPOTENT_REPLAYED_HEADER } from './idempotency/idempotency.options';
export { getOutboxMessageId } from './transports/incoming-message-id';
/** The `@Ctx()` of a consumer's run from its inbox row (`@Idempotent({ retry })`). */
export { OutboxRetryContext } from './transports/outbox-retry.context';
export { OutboxEnvelopeDeserializer } from './transports/outbox-envelope.deserializer';
/** NATS JetStream: a client whose publish completes on the PubAck (`Nats-Msg-Id` = message id); a consumer transport. */
export { OutboxJetStreamClient, OutboxJetStreamContext, OutboxJetStreamServer } from './transports/jetstream';
export { OnOutboxEvent } from './handlers/on-outbox-event.decorator';
export type { OutboxEventContext } from './handlers/outbox-event-context';
export { OutboxTraceInterceptor } from './tracing/outbox-trace.interceptor';

// ── Operating: the relay and its events, dead letters, health, cleanup, metrics ──────────────────────────────
export { OutboxPublisher } from './publisher/outbox-publisher';
export type { OutboxPublisherEvents } from './events/publisher-events';
export { OUTBOX_CHANNELS } from './events/outbox-channels';
export type { OutboxStats } from './dialects/outbox-dialect';
export { OutboxDeadLetters } from './outbox/outbox-dead-letters.service';
export type { DeadLetterFilter } from './outbox/dead-letter.model';
export type { OutboxTrace } from './outbox/outbox-trace.types';
export { OutboxHealthIndicator } from './health/outbox-health.indicator';
export { OutboxCleanupScheduler } from './cleanup/outbox-cleanup.scheduler';
export { OutboxCleanupRegistry } from './scheduling/outbox-cleanup.registry';
export type { OutboxCleanupTask } from './scheduling/outbox-cleanup.registry';
export { OUTBOX_METER, OUTBOX_METRICS } from './observability/metric-names';
export { OUTBOX_IDEMPOTENCY_CHANNEL } from './events/idempotency-channel';
export type { OutboxIdempotencyEvent } from './events/idempotency-channel';

// ── Errors: each names what was wrong and the fix; `code` tells every one apart ──────────────────────────────
export {
  OutboxError,
  OutboxConfigurationError,
  OutboxNoTransactionError,
  OutboxInvalidMessageError,
  OutboxNonRetryableError,
} from './errors';
export type { OutboxErrorCode } from './errors';
export { IdempotencyProblemException } from './idempotency/idempotency.problems';
export { isDatabaseUnavailable } from './dialects/database-unavailable';

// ── Extension points: an interface and what implements it (the `transactions` option) ───────────────────────
export type { OutboxTransactionSource, OutboxTransactionContext } from './transaction/transaction.types';
export { ClsTransactionSource } from './transaction/cls-transaction-source';
