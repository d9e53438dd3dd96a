import { CAUSE_HEADER } from '../outbox.constants';
import type { OutboxTransportName } from '../outbox.options';
import type { OutgoingOutboxMessage } from '../transports/outbox-transport';
import { describeError } from '../util/describe-error';
import { errorTypeOf } from '../util/error-type';
import { openTelemetry } from '../util/opentelemetry';

/** The span of one publish: ended when the broker confirms, or with an error status when the publish fails. */
export interface ProducerSpan {
  end(): void;
  fail(error: unknown): void;
}

/** `messaging.system` of each transport: the semantic conventions' name where there is one. */
const MESSAGING_SYSTEM: Record<OutboxTransportName, string> = {
  rmq: 'rabbitmq',
  kafka: 'kafka',
  nats: 'nats',
  mqtt: 'mqtt',
  redis: 'redis',
  tcp: 'tcp',
};

/** The `messaging.system` attribute of a transport (`rmq` → `rabbitmq`; the transport's name otherwise). */
export function messagingSystem(transport: OutboxTransportName): string {
  return MESSAGING_SYSTEM[transport] ?? transport;
}

/**
 * Starts the `PRODUCER` span of one publish (`send {pattern}`), a child of the trace context the row carries (the
 * span active at `emit()`), and puts the producer span's context into `message.headers` in its place, so the
 * consumer's span becomes its child. Returns `undefined` — and leaves the headers alone — when the row carries no
 * trace context or `@opentelemetry/api` is not installed.
 */
export function startProducerSpan(
  message: OutgoingOutboxMessage,
  transport: OutboxTransportName | undefined,
): ProducerSpan | undefined {
  const api = openTelemetry();
  if (!api || !message.headers.traceparent) return undefined;
  const parent = api.propagation.extract(api.ROOT_CONTEXT, message.headers);
  if (!api.trace.getSpanContext(parent)) return undefined;
  const span = api.trace.getTracer('nestjs-outbox').startSpan(
    `send ${message.pattern}`,
    {
      kind: api.SpanKind.PRODUCER,
      attributes: {
        'messaging.operation.type': 'send',
        'messaging.operation.name': 'send',
        'messaging.destination.name': message.pattern,
        'messaging.message.id': message.messageId,
        ...(transport ? { 'messaging.system': messagingSystem(transport) } : {}),
        ...(message.key === null ? {} : { 'outbox.key': message.key }),
        // The key of the call that emitted it (`x-outbox-cause`): what `OutboxService.trace()` takes.
        ...(message.headers[CAUSE_HEADER] ? { 'outbox.cause': message.headers[CAUSE_HEADER] } : {}),
      },
    },
    parent,
  );
  const carrier: Record<string, string> = {};
  api.propagation.inject(api.trace.setSpan(parent, span), carrier);
  message.headers = { ...message.headers, ...carrier };
  return {
    end: () => span.end(),
    fail: (error) => {
      span.recordException(error instanceof Error ? error : String(error));
      span.setStatus({ code: api.SpanStatusCode.ERROR, message: describeError(error) });
      span.setAttribute('error.type', errorTypeOf(error));
      span.end();
    },
  };
}
