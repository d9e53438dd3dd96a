import { DynamicModule, Module, type Type } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { OutboxCleanupRegistry } from './scheduling/outbox-cleanup.registry';
import { OutboxCleanupScheduler } from './cleanup/outbox-cleanup.scheduler';
import { IdempotencyService } from './idempotency/idempotency.service';
import { idempotencyOpenApiContractProvider } from './integrations/openapi-contract';
import {
  getOutboxToken,
  isDefaultDataSource,
  OUTBOX_DATA_SOURCE,
  OUTBOX_DATA_SOURCE_NAME,
  OUTBOX_OPTIONS,
  OUTBOX_TABLES,
} from './outbox.constants';
import {
  OUTBOX_ASYNC_OPTIONS_TYPE,
  OUTBOX_OPTIONS_TYPE,
  OUTBOX_RAW_OPTIONS,
  OutboxConfigurableModule,
} from './outbox.module-definition';
import type { OutboxModuleOptions } from './outbox.options';
import { resolveOutboxOptions } from './outbox.options-validation';
import { OutboxDeadLetters } from './outbox/outbox-dead-letters.service';
import { outboxEntitySet } from './schema/outbox-entities';
import { outboxTableNames, type OutboxTablesOptions } from './schema/outbox-table-names';
import { OutboxService } from './outbox/outbox.service';
import { OutboxPublisher } from './publisher/outbox-publisher';
import { OutboxHealthIndicator } from './health/outbox-health.indicator';
import { namedOutboxProviders } from './util/named-providers';
import { OUTBOX_PROVIDERS } from './outbox.providers';

/** The providers an outbox exports (under class tokens for the default DataSource, named tokens otherwise). */
const OUTBOX_EXPORTS: readonly Type<unknown>[] = [
  OutboxService,
  OutboxHealthIndicator,
  IdempotencyService,
  OutboxPublisher,
  OutboxCleanupRegistry,
  OutboxDeadLetters,
  OutboxCleanupScheduler,
];

/**
 * The outbox: `OutboxService` (transactions + emit), the `OutboxMessage` entity (registered with
 * `TypeOrmModule.forFeature`, so `autoLoadEntities` picks it up) and the publisher.
 *
 * ```ts
 * OutboxModule.forRoot({ client: 'BROKER' })
 * OutboxModule.forRootAsync({ imports: [ConfigModule], inject: [ConfigService], useFactory: (c) => ({ client: 'BROKER' }) })
 * OutboxModule.forRoot({ dataSource: 'billing', client: 'BILLING_BROKER' }) // one more outbox: @InjectOutbox('billing')
 * OutboxModule.forRoot({ dataSource: 'billing', tables: { prefix: 'billing_' }, client: 'BILLING_BROKER' })
 * ```
 */
@Module({})
export class OutboxModule extends OutboxConfigurableModule {
  static forRoot(options: typeof OUTBOX_OPTIONS_TYPE): DynamicModule {
    const { isGlobal: _global, dataSource: _dataSource, tables: _tables, ...moduleOptions } = options ?? {};
    resolveOutboxOptions(moduleOptions); // fail at the import line, before anything connects
    return OutboxModule.complete(super.forRoot(options));
  }

  static forRootAsync(options: typeof OUTBOX_ASYNC_OPTIONS_TYPE): DynamicModule {
    return OutboxModule.complete(super.forRootAsync(options));
  }

  private static complete(
    definition: DynamicModule & { dataSourceName?: string; tables?: OutboxTablesOptions },
  ): DynamicModule {
    const { dataSourceName, tables: tablesOption, ...module } = definition;
    const tables = outboxTableNames(tablesOption); // a bad prefix or schema fails at the import line
    const entities = outboxEntitySet(tables);
    // A named DataSource's outbox provides and exports its classes under tokens of its own (`getOutboxToken(X,
    // name)`), so that it can be imported beside the default outbox (and other named ones) without any class token
    // colliding; the default outbox keeps the class tokens.
    const named = !isDefaultDataSource(dataSourceName);
    const exports = named ? OUTBOX_EXPORTS.map((p) => getOutboxToken(p, dataSourceName)) : [...OUTBOX_EXPORTS];
    return {
      ...module,
      imports: [
        ...(module.imports ?? []),
        DiscoveryModule,
        TypeOrmModule.forFeature(
          [entities.message, entities.keyLock, entities.idempotencyRecord, entities.idempotencyStep, entities.attempt],
          dataSourceName,
        ),
      ],
      providers: [
        ...(module.providers ?? []),
        {
          provide: OUTBOX_OPTIONS,
          useFactory: (raw: OutboxModuleOptions) => resolveOutboxOptions(raw),
          inject: [OUTBOX_RAW_OPTIONS],
        },
        { provide: OUTBOX_DATA_SOURCE, useExisting: getDataSourceToken(dataSourceName) },
        { provide: OUTBOX_DATA_SOURCE_NAME, useValue: dataSourceName ?? 'default' },
        { provide: OUTBOX_TABLES, useValue: tables },
        ...(named ? namedOutboxProviders(OUTBOX_PROVIDERS, dataSourceName!) : OUTBOX_PROVIDERS),
        idempotencyOpenApiContractProvider,
      ],
      exports,
    };
  }
}
