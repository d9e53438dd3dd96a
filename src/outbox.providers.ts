import type { Type } from '@nestjs/common';
import { OutboxCleanupScheduler } from './cleanup/outbox-cleanup.scheduler';
import { OutboxDestinations } from './destinations/outbox-destinations';
import { OutboxDatabase } from './dialects/outbox-database';
import { OutboxHandlerRegistry } from './handlers/outbox-handler-registry';
import { OutboxHealthIndicator } from './health/outbox-health.indicator';
import { ConsumerRegistry } from './idempotency/consumer-registry';
import { IdempotentOptionsCheck } from './idempotency/handler-options';
import { IdempotencyService } from './idempotency/idempotency.service';
import { OutboxMetrics } from './observability/outbox-metrics';
import { OutboxPublisher } from './publisher/outbox-publisher';
import { OutboxCleanupRegistry } from './scheduling/outbox-cleanup.registry';
import { OutboxRelayRegistry } from './scheduling/outbox-relay.registry';
import { OutboxTracingLoader } from './tracing/outbox-tracing.loader';
import { OutboxTransactionSourceRegistrar } from './transaction/transaction-source.registrar';
import { OutboxDeadLetters } from './outbox/outbox-dead-letters.service';
import { OutboxSchemaCheck } from './outbox/outbox-schema.check';
import { OutboxService } from './outbox/outbox.service';

/**
 * The classes of one outbox, provided by each `OutboxModule` import: under class tokens for the default DataSource,
 * under named tokens (`getOutboxToken(X, name)`, see `namedOutboxProviders()`) for a named one. A class replacing one
 * of them in a named outbox (the testing kit's publisher) is given the same named tokens.
 */
export const OUTBOX_PROVIDERS: readonly Type<unknown>[] = [
  OutboxDatabase,
  OutboxSchemaCheck,
  OutboxCleanupRegistry,
  OutboxRelayRegistry,
  OutboxDestinations,
  OutboxPublisher,
  OutboxService,
  IdempotencyService,
  IdempotentOptionsCheck,
  OutboxTransactionSourceRegistrar,
  OutboxHealthIndicator,
  OutboxTracingLoader,
  OutboxDeadLetters,
  OutboxCleanupScheduler,
  OutboxMetrics,
  OutboxHandlerRegistry,
  ConsumerRegistry,
];
