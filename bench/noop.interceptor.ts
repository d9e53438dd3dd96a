import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';

/**
 * An interceptor that does nothing but return `next.handle()`: what Nest's interceptor chain alone costs a route or
 * a message handler (the `intercepted` variants of `idempotency-http` and `consumer-dedup`).
 */
@Injectable()
export class NoopInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler) {
    return next.handle();
  }
}
