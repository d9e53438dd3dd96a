export { OutboxModule } from './outbox.module';
export type {
  OutboxModuleOptions,
  OutboxModuleExtras,
  OutboxPublisherOptions,
  OutboxRetryOptions,
  OutboxCleanupOptions,
  OutboxTransportName,
  ResolvedOutboxOptions,
} from './outbox.options';
export { DEFAULT_PUBLISHER_OPTIONS, DEFAULT_RETRY_OPTIONS, DEFAULT_CLEANUP_OPTIONS } from './outbox.options';
export { OUTBOX_OPTIONS, OUTBOX_DATA_SOURCE, OUTBOX_PUBLISHER_JOB, MESSAGE_ID_HEADER } from './outbox.constants';
export * from './errors';
export { OutboxMessage } from './schema/outbox-message.entity';
export type { OutboxMessageStatus } from './schema/outbox-message.entity';
export { OutboxService } from './outbox/outbox.service';
export type { EmitOptions } from './outbox/outbox.service';
export { OutboxPublisher } from './publisher/outbox-publisher';
export type { OutboxPassResult } from './publisher/publish-pass';
export type { OutboxPublisherEvents, OutboxLeaseLostEvent, OutboxDeadEvent, OutboxRetryEvent } from './events/publisher-events';
export { OutboxDeadLetters } from './outbox/outbox-dead-letters.service';
export type { ListDeadOptions } from './outbox/outbox-dead-letters.service';
export type { OutboxStats } from './dialects/outbox-dialect';
export { OutboxKeyLock, OUTBOX_KEY_LOCK_TABLE } from './schema/outbox-key-lock.entity';
export { OutboxCleanupRegistry } from './scheduling/outbox-cleanup.registry';
export type { OutboxCleanupTask } from './scheduling/outbox-cleanup.registry';
export { OutboxCleanupScheduler, OUTBOX_CLEANUP_JOB } from './cleanup/outbox-cleanup.scheduler';
export { dispatchEvent } from './transports/dispatch';
export type { OutboxKafkaRecord } from './transports/kafka.transport';
export type { OutboxTransactionOptions } from './transaction/transaction.types';
export type { OutboxTransactionSource } from './transaction/transaction.types';
export type { OutboxTransactionContext } from './transaction/transaction.types';
export { ClsTransactionSource } from './transaction/cls-transaction-source';
export type { ClsTransactionSourceOptions } from './transaction/cls-transaction-source';
export { OutboxEnvelopeDeserializer } from './transports/outbox-envelope.deserializer';
export { getOutboxMessageId } from './transports/incoming-message-id';
export { Idempotent } from './idempotency/idempotent.decorator';
export { IdempotencyKey } from './idempotency/idempotency-key.decorator';
export { IdempotencyInterceptor } from './idempotency/idempotency.interceptor';
export type { ResolvedIdempotentOptions, StoredResponse, IdempotentCall } from './idempotency/idempotency.interceptor';
export { IdempotencyService, IDEMPOTENCY_CLEANUP_TASK } from './idempotency/idempotency.service';
export { IdempotencyRecord, IDEMPOTENCY_TABLE, IDEMPOTENCY_UNIQUE_CONSTRAINT } from './schema/idempotency-record.entity';
export { IdempotencyProblemException } from './idempotency/idempotency.problems';
export { IdempotencyProblemFilter } from './idempotency/idempotency-problem.filter';
export { isDatabaseUnavailable } from './idempotency/database-unavailable';
export { CreateOutboxTables1764374400000 } from './schema/migrations/1764374400000-outbox-tables';
export { CreateIdempotencyKeys1764460800000 } from './schema/migrations/1764460800000-idempotency-keys';
export type { IdempotencyProblemDetails } from './idempotency/idempotency.problems';
export { IDEMPOTENT_OPTIONS } from './idempotency/idempotency.constants';
export { DEFAULT_IDEMPOTENCY_OPTIONS, IDEMPOTENT_REPLAYED_HEADER, MAX_IDEMPOTENCY_KEY_LENGTH } from './idempotency/idempotency.options';
export type { IdempotencyDefaults, IdempotentOptions, ResolvedIdempotencyDefaults } from './idempotency/idempotency.options';
export type { IdempotencyStore, IdempotencyAttempt, IdempotencyBegin, StoredIdempotencyRecord, NewIdempotencyRecord } from './idempotency/idempotency-store';
export { OutboxHealthIndicator, DEFAULT_OUTBOX_HEALTH_THRESHOLDS } from './health/outbox-health.indicator';
export type { OutboxHealthThresholds, OutboxHealthDetails } from './health/outbox-health.indicator';
export { OUTBOX_CHANNELS } from './events/outbox-channels';
export type { OutboxPublishedEvent } from './events/publisher-events';
export { OutboxTraceInterceptor } from './tracing/outbox-trace.interceptor';
export { OutboxMetrics } from './observability/outbox-metrics';
export { OUTBOX_METER, OUTBOX_METRICS } from './observability/metric-names';
export type { OutboxMetricsOptions, OutboxMeterProviderLike } from './outbox.options';
export type { OutboxPublishedMessage, OutboxRequeuedEvent } from './events/publisher-events';
