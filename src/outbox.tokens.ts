import { Inject, type Type } from '@nestjs/common';
import { isDefaultDataSource } from './outbox-resource-names';
import { OutboxService } from './outbox/outbox.service';

/**
 * Injection token of one of an outbox's providers (`OutboxService`, `OutboxDeadLetters`, `OutboxHealthIndicator`,
 * `IdempotencyService`, `OutboxPublisher`, `OutboxCleanupScheduler`, `OutboxCleanupRegistry`): the class itself for
 * the default DataSource, a string of its own for a named one — as `getDataSourceToken()` of `@nestjs/typeorm`.
 *
 * ```ts
 * constructor(@Inject(getOutboxToken(OutboxDeadLetters, 'billing')) private readonly billingDeadLetters: OutboxDeadLetters) {}
 * ```
 */
export function getOutboxToken<T>(provider: Type<T>, dataSource?: string): Type<T> | string {
  return isDefaultDataSource(dataSource) ? provider : `nestjs-outbox:${dataSource}:${provider.name}`;
}

/** Injection token of the `OutboxService` of a DataSource: `OutboxService` for the default one. */
export function getOutboxServiceToken(dataSource?: string): Type<OutboxService> | string {
  return getOutboxToken(OutboxService, dataSource);
}

/**
 * Injects the `OutboxService` of the outbox imported with `OutboxModule.forRoot({ dataSource })` — the mirror of
 * `@InjectDataSource(name)`. Without a name (or with `'default'`) it injects the default outbox's, as a plain
 * `OutboxService` parameter does. `provider` picks another of the outbox's providers (`OutboxDeadLetters`, …).
 *
 * ```ts
 * constructor(@InjectOutbox('billing') private readonly billing: OutboxService) {}
 * ```
 */
export function InjectOutbox(
  dataSource?: string,
  provider: Type<unknown> = OutboxService,
): PropertyDecorator & ParameterDecorator {
  return Inject(getOutboxToken(provider, dataSource));
}
