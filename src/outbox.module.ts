import { DynamicModule, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { OutboxCleanupRegistry } from './scheduling/outbox-cleanup.registry';
import { OutboxCleanupScheduler } from './cleanup/outbox-cleanup.scheduler';
import { IdempotencyRecord } from './schema/idempotency-record.entity';
import { IdempotencyService } from './idempotency/idempotency.service';
import { OUTBOX_DATA_SOURCE, OUTBOX_OPTIONS } from './outbox.constants';
import {
  OUTBOX_ASYNC_OPTIONS_TYPE,
  OUTBOX_OPTIONS_TYPE,
  OUTBOX_RAW_OPTIONS,
  OutboxConfigurableModule,
} from './outbox.module-definition';
import type { OutboxModuleOptions } from './outbox.options';
import { resolveOutboxOptions } from './outbox.options-validation';
import { OutboxDatabase } from './dialects/outbox-database';
import { OutboxSchemaCheck } from './outbox/outbox-schema.check';
import { OutboxDeadLetters } from './outbox/outbox-dead-letters.service';
import { OutboxKeyLock } from './schema/outbox-key-lock.entity';
import { OutboxMessage } from './schema/outbox-message.entity';
import { OutboxAttempt } from './schema/outbox-attempt.entity';
import { OutboxService } from './outbox/outbox.service';
import { OutboxPublisher } from './publisher/outbox-publisher';
import { OutboxTransactionSourceRegistrar } from './transaction/transaction-source.registrar';
import { OutboxHealthIndicator } from './health/outbox-health.indicator';
import { OutboxTracingLoader } from './tracing/outbox-tracing.loader';
import { OutboxMetrics } from './observability/outbox-metrics';
import { OutboxHandlerRegistry } from './handlers/outbox-handler-registry';

/**
 * The outbox: `OutboxService` (transactions + emit), the `OutboxMessage` entity (registered with
 * `TypeOrmModule.forFeature`, so `autoLoadEntities` picks it up) and the publisher.
 *
 * ```ts
 * OutboxModule.forRoot({ client: 'BROKER' })
 * OutboxModule.forRootAsync({ imports: [ConfigModule], inject: [ConfigService], useFactory: (c) => ({ client: 'BROKER' }) })
 * ```
 */
@Module({})
export class OutboxModule extends OutboxConfigurableModule {
  static forRoot(options: typeof OUTBOX_OPTIONS_TYPE): DynamicModule {
    const { isGlobal: _global, dataSource: _dataSource, ...moduleOptions } = options ?? {};
    resolveOutboxOptions(moduleOptions); // fail at the import line, before anything connects
    return OutboxModule.complete(super.forRoot(options));
  }

  static forRootAsync(options: typeof OUTBOX_ASYNC_OPTIONS_TYPE): DynamicModule {
    return OutboxModule.complete(super.forRootAsync(options));
  }

  private static complete(definition: DynamicModule & { dataSourceName?: string }): DynamicModule {
    const { dataSourceName, ...module } = definition;
    return {
      ...module,
      imports: [
        ...(module.imports ?? []),
        DiscoveryModule,
        TypeOrmModule.forFeature([OutboxMessage, OutboxKeyLock, IdempotencyRecord, OutboxAttempt], dataSourceName),
      ],
      providers: [
        ...(module.providers ?? []),
        {
          provide: OUTBOX_OPTIONS,
          useFactory: (raw: OutboxModuleOptions) => resolveOutboxOptions(raw),
          inject: [OUTBOX_RAW_OPTIONS],
        },
        { provide: OUTBOX_DATA_SOURCE, useExisting: getDataSourceToken(dataSourceName) },
        OutboxDatabase,
        OutboxSchemaCheck,
        OutboxCleanupRegistry,
        OutboxPublisher,
        OutboxService,
        IdempotencyService,
        OutboxTransactionSourceRegistrar,
        OutboxHealthIndicator,
        OutboxTracingLoader,
        OutboxDeadLetters,
        OutboxCleanupScheduler,
        OutboxMetrics,
        OutboxHandlerRegistry,
      ],
      exports: [
        OutboxService,
        OutboxHealthIndicator,
        IdempotencyService,
        OutboxPublisher,
        OutboxCleanupRegistry,
        OutboxDeadLetters,
        OutboxCleanupScheduler,
      ],
    };
  }
}
