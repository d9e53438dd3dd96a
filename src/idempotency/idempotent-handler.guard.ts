import { CanActivate, ExecutionContext, Injectable, type Type } from '@nestjs/common';
import { defer, lastValueFrom } from 'rxjs';
import type { HandlerBody, ResolvedIdempotentOptions } from './idempotent-call.types';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import { callHolder } from './call-holder';
import { GuardedCall, leaveGuardedCall } from './guarded-call';
import { forDataSource } from './named-idempotency.interceptor';

/**
 * The guarded path of `@Idempotent()` (see `guarded-path.ts`). Nest runs guards before the pipes and the handler,
 * without the Observable machinery of an interceptor chain: this guard reads the key — a request's header, checked
 * (a missing or malformed one is refused here with the 400 problem), or a message's id — and leaves a `GuardedCall`
 * for the handler's wrapper, which runs the handler's body through `handleRequest` or `handleMessage`: the
 * interceptor's own steps, inherited. It refuses nothing else.
 */
@Injectable()
export class IdempotentHandlerGuard extends IdempotencyInterceptor implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const type = context.getType();
    if (type === 'http') this.guardRequest(context);
    else if (type === 'rpc') this.guardMessage(context);
    return true;
  }

  /** A request with a key leaves its call; one without (a safe method, an optional key) runs unguarded. */
  protected guardRequest(context: ExecutionContext): void {
    const options = this.optionsOf(context);
    const key = this.httpKeyOf(context, options);
    const holder = callHolder(context);
    if (key === undefined || !holder) return;
    leaveGuardedCall(holder, new GuardedCall(context, (body) => this.runRequest(context, key, options, body)));
  }

  protected guardMessage(context: ExecutionContext): void {
    const holder = callHolder(context);
    if (!holder) return;
    const key = this.messageKeyOf(context);
    leaveGuardedCall(holder, new GuardedCall(context, (body) => this.handleMessage(context, key, body)));
  }

  /** `handleRequest` with the handler's body in place of an interceptor's `next`; resolves with the answer. */
  protected async runRequest(
    context: ExecutionContext,
    key: string,
    options: ResolvedIdempotentOptions,
    body: HandlerBody,
  ): Promise<unknown> {
    const answer = await this.handleRequest(context, key, options, { handle: () => defer(body) });
    return lastValueFrom(answer, { defaultValue: undefined });
  }
}

/** The guard of `@Idempotent({ dataSource })`'s guarded path. */
export function idempotentHandlerGuardFor(dataSource: string | undefined): Type<IdempotentHandlerGuard> {
  return forDataSource(IdempotentHandlerGuard, dataSource);
}
