import { Inject, type Type } from '@nestjs/common';
import { getOutboxToken } from '../outbox.constants';
import { OutboxService } from './outbox.service';

/**
 * Injects the `OutboxService` of the outbox imported with `OutboxModule.forRoot({ dataSource })` — the mirror of
 * `@InjectDataSource(name)`. Without a name (or with `'default'`) it injects the default outbox's, as a plain
 * `OutboxService` parameter does. `provider` picks another of the outbox's providers (`OutboxDeadLetters`, …); the token it injects is
 * `getOutboxToken(provider, dataSource)`, which `app.get()` takes too.
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
