import { CanActivate, ExecutionContext, Injectable, type Type } from '@nestjs/common';
import type { HandlerBody } from './idempotent-call.types';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import { GuardedMessageCall, leaveGuardedCall, messageHolder } from './message-call';
import { forDataSource } from './named-idempotency.interceptor';

/**
 * The message path of `@Idempotent()` (see `message-path.ts`). Nest runs guards before the pipes and the handler,
 * without the Observable machinery of an interceptor chain: this guard reads the message's key and leaves a
 * `GuardedMessageCall` for the handler's wrapper, which runs the handler's body through `handleMessage` — the
 * interceptor's own steps, inherited. It never refuses a message.
 */
@Injectable()
export class IdempotentMessageGuard extends IdempotencyInterceptor implements CanActivate {
  private readonly handle = (context: ExecutionContext, key: string | undefined, body: HandlerBody) =>
    this.handleMessage(context, key, body);

  canActivate(context: ExecutionContext): boolean {
    if (context.getType() !== 'rpc') return true;
    const holder = messageHolder(context);
    if (holder) leaveGuardedCall(holder, new GuardedMessageCall(context, this.messageKeyOf(context), this.handle));
    return true;
  }
}

/** The guard of `@Idempotent({ dataSource })`'s message path. */
export function idempotentMessageGuardFor(dataSource: string | undefined): Type<IdempotentMessageGuard> {
  return forDataSource(IdempotentMessageGuard, dataSource);
}
