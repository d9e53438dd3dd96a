import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import { defer, from, mergeMap, Observable } from 'rxjs';
import { CAUSE_HEADER } from '../outbox.constants';
import { getOutboxMessageId } from '../transports/incoming-message-id';
import { incomingHeaders } from '../transports/incoming-headers';
import { describeError } from '../util/describe-error';
import { loadOpenTelemetry, openTelemetry } from '../util/opentelemetry';

/**
 * Restores, around a message handler, the trace context that was active when the message was emitted
 * (stored in the outbox row's headers and sent with the message), and runs the handler in a `CONSUMER` span
 * that is its child: one trace then spans request → outbox → broker → consumer. The relay publishes each traced
 * message in a `PRODUCER` span and sends that span's context, so the consumer span is the producer span's child and
 * also links to it (the messaging conventions' link to the message's creation context). Does nothing for HTTP, for
 * messages without trace headers, or when `@opentelemetry/api` is not installed.
 *
 * ```ts
 * app.useGlobalInterceptors(new OutboxTraceInterceptor());   // or @UseInterceptors(OutboxTraceInterceptor)
 * ```
 * On TCP and Redis the consumer needs `OutboxEnvelopeDeserializer` (the headers travel in the envelope).
 */
@Injectable()
export class OutboxTraceInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'rpc') return next.handle();
    if (openTelemetry() === undefined)
      return from(loadOpenTelemetry()).pipe(mergeMap(() => this.traced(context, next)));
    return this.traced(context, next);
  }

  /** Runs the handler in a consumer span whose parent is the context carried by the message. */
  protected traced(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const api = openTelemetry();
    if (!api) return next.handle();
    const rpc = context.switchToRpc();
    const headers = incomingHeaders(rpc.getData(), rpc.getContext());
    if (!headers.traceparent) return next.handle();
    const parent = api.propagation.extract(api.ROOT_CONTEXT, headers);
    const sent = api.trace.getSpanContext(parent);
    const pattern = this.patternOf(context);
    const messageId = getOutboxMessageId(context);
    const span = api.trace.getTracer('nestjs-outbox').startSpan(
      `${pattern} process`,
      {
        kind: api.SpanKind.CONSUMER,
        // The message's creation context: the publisher's PRODUCER span (or the emit-time span of an older relay).
        links: sent ? [{ context: sent }] : [],
        attributes: {
          'messaging.operation.type': 'process',
          'messaging.destination.name': pattern,
          ...(messageId ? { 'messaging.message.id': messageId } : {}),
          ...(headers[CAUSE_HEADER] ? { 'outbox.cause': headers[CAUSE_HEADER] } : {}),
        },
      },
      parent,
    );
    const active = api.trace.setSpan(parent, span);
    return new Observable((subscriber) => {
      const subscription = api.context.with(active, () =>
        defer(() => next.handle()).subscribe({
          next: (value) => subscriber.next(value),
          error: (error: unknown) => {
            span.recordException(error instanceof Error ? error : String(error));
            span.setStatus({ code: api.SpanStatusCode.ERROR, message: describeError(error) });
            span.end();
            subscriber.error(error);
          },
          complete: () => {
            span.end();
            subscriber.complete();
          },
        }),
      );
      return () => subscription.unsubscribe();
    });
  }

  protected patternOf(context: ExecutionContext): string {
    const rpc = context.switchToRpc().getContext() as { getPattern?: () => string } | undefined;
    const pattern = typeof rpc?.getPattern === 'function' ? rpc.getPattern() : undefined;
    return typeof pattern === 'string' ? pattern.replace(/^"|"$/g, '') : context.getHandler().name;
  }
}
