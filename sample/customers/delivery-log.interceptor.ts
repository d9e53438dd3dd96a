import { CallHandler, ExecutionContext, Injectable, Logger, NestInterceptor } from '@nestjs/common';
import { getOutboxMessageId } from 'nestjs-outbox';
import { Observable, tap } from 'rxjs';
import { DeliveryLog } from './delivery-log';

/**
 * Wraps the consumer (outside `@Idempotent()`) and writes one line per delivery: applied, or skipped because
 * that message id was already applied. The handler marks its transport context when it runs.
 */
@Injectable()
export class DeliveryLogInterceptor implements NestInterceptor {
  private readonly logger = new Logger('OrderPlacedConsumer');

  constructor(private readonly log: DeliveryLog) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'rpc') return next.handle();
    const rpc = context.switchToRpc();
    const transportContext = rpc.getContext() as object;
    const payload = rpc.getData();
    const messageId = getOutboxMessageId(context) ?? null;
    const pattern = String(
      (transportContext as { getPattern?: () => string }).getPattern?.() ?? context.getHandler().name,
    );
    return next.handle().pipe(
      tap({
        complete: () => {
          const outcome = this.log.wasApplied(transportContext) ? 'applied' : 'skipped: already applied';
          this.log.record({ messageId, pattern, payload, outcome });
          this.logger.log(`${pattern} ${messageId ?? '(no message id)'}: ${outcome}`);
        },
        error: (error: unknown) => {
          this.log.record({
            messageId,
            pattern,
            payload,
            outcome: 'failed',
            error: String((error as Error)?.message ?? error),
          });
          this.logger.warn(
            `${pattern} ${messageId ?? '(no message id)'}: failed, rolled back (${(error as Error)?.message ?? error})`,
          );
        },
      }),
    );
  }
}
