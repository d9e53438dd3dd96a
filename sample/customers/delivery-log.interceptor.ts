import { CallHandler, ExecutionContext, Injectable, Logger, NestInterceptor } from '@nestjs/common';
import { getOutboxMessageId } from 'nestjs-outbox';
import { Observable, tap } from 'rxjs';
import { DeliveryLog } from './delivery-log';

/**
 * Wraps the consumer (outside `@Idempotent()`) and writes one line per delivery: applied, skipped because that
 * message id was already applied, or failed (stored for retry). The handler marks its transport context.
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
          const end = this.log.endOf(transportContext);
          if (end && !end.applied) {
            // @Idempotent({ retry }) rolled the handler back and stored the message for a retry (or as dead).
            this.log.record({ messageId, pattern, payload, outcome: 'failed', error: end.error });
            this.logger.warn(`${pattern} ${messageId ?? '(no message id)'}: failed, stored for retry (${end.error})`);
            return;
          }
          const outcome = end ? 'applied' : 'skipped: already applied';
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
