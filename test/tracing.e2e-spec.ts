import { Controller, INestMicroservice, Module, UseInterceptors } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, EventPattern, MicroserviceOptions, Payload, RmqContext, Transport } from '@nestjs/microservices';
import { RmqRecordSerializer } from '@nestjs/microservices/serializers/rmq-record.serializer';
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncHooksContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { getOutboxMessageId, OutboxEnvelopeDeserializer, OutboxMessage, OutboxTraceInterceptor } from '../src';
import { deleteQueue, rmqClientOptions, rmqConsumerOptions, uniqueQueue } from './helpers/consumers';
import { DATABASE_LABEL, DatabaseKind } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { freePort, waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/** The OpenTelemetry SDK as an app registers it, exporting to memory. */
const exporter = new InMemorySpanExporter();
const contextManager = new AsyncHooksContextManager().enable();
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
context.setGlobalContextManager(contextManager);
propagation.setGlobalPropagator(new W3CTraceContextPropagator());
const tracer = trace.getTracer('test-app');

interface Handled {
  messageId?: string;
  traceId?: string;
  spanId?: string;
}

/** A consumer app whose handler records the span it runs in, after an await (the context must survive it). */
async function startTracedConsumer(
  options: MicroserviceOptions,
): Promise<{ app: INestMicroservice; handled: Handled[] }> {
  const handled: Handled[] = [];
  @Controller()
  @UseInterceptors(OutboxTraceInterceptor)
  class OrdersConsumer {
    @EventPattern('OrderPlaced')
    async onOrderPlaced(@Payload() data: unknown, @Ctx() ctx: unknown) {
      await new Promise((r) => setTimeout(r, 5));
      const span = trace.getActiveSpan()?.spanContext();
      handled.push({ messageId: getOutboxMessageId(data, ctx), traceId: span?.traceId, spanId: span?.spanId });
      if (ctx instanceof RmqContext) ctx.getChannelRef().ack(ctx.getMessage());
    }
  }
  @Module({ controllers: [OrdersConsumer] })
  class ConsumerModule {}
  const app = await NestFactory.createMicroservice<MicroserviceOptions>(ConsumerModule, {
    ...options,
    logger: false,
  } as unknown as MicroserviceOptions);
  await app.listen();
  return { app, handled };
}

const setups: Array<{ name: string; kind: DatabaseKind; services: ('postgres' | 'rabbitmq')[]; system: string }> = [
  { name: 'RabbitMQ (RMQ transport)', kind: 'postgres', services: ['postgres', 'rabbitmq'], system: 'rabbitmq' },
  { name: 'TCP (envelope)', kind: 'sqlite', services: [], system: 'tcp' },
];

/** The client's serializer, made to throw on demand (a publish that fails, then succeeds on retry). */
class SwitchableSerializer {
  failing = false;
  constructor(private readonly inner: { serialize(value: any): any } = { serialize: (value) => value }) {}
  serialize(value: any): any {
    if (this.failing) throw new Error('serializer cannot encode this message now');
    return this.inner.serialize(value);
  }
}

for (const setup of setups) {
  describeWith(
    setup.services,
    `OpenTelemetry trace context: request → outbox → ${setup.name} → consumer, on ${DATABASE_LABEL[setup.kind]}`,
    () => {
      let consumer: Awaited<ReturnType<typeof startTracedConsumer>>;
      const queue = uniqueQueue('outbox-trace');
      const serializer = new SwitchableSerializer(setup.kind === 'postgres' ? new RmqRecordSerializer() : undefined);
      const fx = useOutboxApp(setup.kind, async ({ defer }) => {
        let client;
        if (setup.kind === 'postgres') {
          defer(() => deleteQueue(queue));
          consumer = await startTracedConsumer(rmqConsumerOptions(queue));
          client = rmqClientOptions(queue, undefined, { serializer });
        } else {
          const port = await freePort();
          consumer = await startTracedConsumer({
            transport: Transport.TCP,
            options: { host: '127.0.0.1', port, deserializer: new OutboxEnvelopeDeserializer() },
          });
          client = { transport: Transport.TCP, options: { host: '127.0.0.1', port, serializer } };
        }
        defer(() => consumer.app.close());
        const outbox = { publisher: { pollingInterval: 50 }, retry: { initialDelay: 20, maxDelay: 50 } };
        return { client: client as any, logger: false, outbox };
      });

      beforeEach(() => exporter.reset());

      it('stores the active trace context at emit(), sends it, and runs the handler in a consumer span of that trace', async () => {
        const { outbox } = fx;
        const request = tracer.startSpan('POST /orders', { kind: SpanKind.SERVER });
        const id = await context.with(trace.setSpan(context.active(), request), () =>
          outbox.transaction(() => outbox.emit('OrderPlaced', { orderId: 1 }, { headers: { tenant: 'acme' } })),
        );
        request.end();
        const { traceId, spanId } = request.spanContext();

        const row = await fx.dataSource.getRepository(OutboxMessage).findOneByOrFail({ messageId: id });
        expect(JSON.parse(row.headers!)).toEqual({ tenant: 'acme', traceparent: `00-${traceId}-${spanId}-01` });

        await waitFor(() => consumer.handled.some((h) => h.messageId === id), 'the consumer to handle OrderPlaced');
        const handled = consumer.handled.find((h) => h.messageId === id)!;
        expect(handled.traceId).toBe(traceId);

        await waitFor(
          () => exporter.getFinishedSpans().some((s) => s.name === 'OrderPlaced process'),
          'the consumer span to end',
        );
        // The producer span ends at the broker's confirmation, which may come after the consumer already ran.
        const producersOf = () => exporter.getFinishedSpans().filter((s) => s.name === 'send OrderPlaced');
        await waitFor(() => producersOf().length > 0, 'the producer span to end at the confirmation');
        const producers = producersOf();
        expect(producers).toHaveLength(1);
        const producer = producers[0];
        expect(producer.kind).toBe(SpanKind.PRODUCER);
        expect(producer.spanContext().traceId).toBe(traceId);
        expect(producer.parentSpanContext?.spanId).toBe(spanId);
        expect(producer.status.code).toBe(SpanStatusCode.UNSET);
        expect(producer.attributes).toEqual({
          'messaging.system': setup.system,
          'messaging.operation.type': 'send',
          'messaging.operation.name': 'send',
          'messaging.destination.name': 'OrderPlaced',
          'messaging.message.id': id,
        });

        const span = exporter.getFinishedSpans().find((s) => s.name === 'OrderPlaced process')!;
        expect(span.kind).toBe(SpanKind.CONSUMER);
        expect(span.spanContext().traceId).toBe(traceId);
        expect(span.parentSpanContext?.spanId).toBe(producer.spanContext().spanId);
        expect(span.links.map((l) => l.context.spanId)).toEqual([producer.spanContext().spanId]);
        expect(span.spanContext().spanId).toBe(handled.spanId);
        expect(span.attributes).toMatchObject({ 'messaging.message.id': id, 'messaging.operation.type': 'process' });
        // The row keeps the emit-time context; only the message on the wire carries the producer span's.
        const after = await fx.dataSource.getRepository(OutboxMessage).findOneByOrFail({ messageId: id });
        expect(JSON.parse(after.headers!).traceparent).toBe(`00-${traceId}-${spanId}-01`);
      });

      it("puts the emitting call's key (x-outbox-cause) on the producer and consumer spans as outbox.cause", async () => {
        const { outbox } = fx;
        const incoming = `incoming-${Date.now().toString(36)}`;
        const request = tracer.startSpan('consume Incoming', { kind: SpanKind.CONSUMER });
        let id = '';
        await context.with(trace.setSpan(context.active(), request), () =>
          outbox.once(
            incoming,
            async () => {
              id = await outbox.emit('OrderPlaced', { orderId: 4 });
            },
            { scope: 'tracing-test' },
          ),
        );
        request.end();
        const row = await fx.dataSource.getRepository(OutboxMessage).findOneByOrFail({ messageId: id });
        expect([row.causeScope, row.causeKey]).toEqual(['tracing-test', incoming]);
        const ended = (name: string) =>
          exporter.getFinishedSpans().find((s) => s.name === name && s.attributes['messaging.message.id'] === id);
        await waitFor(() => ended('send OrderPlaced') !== undefined, 'the producer span to end');
        await waitFor(() => ended('OrderPlaced process') !== undefined, 'the consumer span to end');
        expect(ended('send OrderPlaced')!.attributes['outbox.cause']).toBe(incoming);
        expect(ended('OrderPlaced process')!.attributes['outbox.cause']).toBe(incoming);
      });

      it('ends the producer span of a failed publish with an error status, and a new one for the retry that succeeds', async () => {
        const { outbox } = fx;
        serializer.failing = true;
        const request = tracer.startSpan('POST /orders', { kind: SpanKind.SERVER });
        const id = await context.with(trace.setSpan(context.active(), request), () =>
          outbox.transaction(() => outbox.emit('OrderPlaced', { orderId: 3 }, { key: 'k-trace' })),
        );
        request.end();
        // This message's publish spans only (a span of an earlier test may end late, at its confirmation).
        const sends = () =>
          exporter
            .getFinishedSpans()
            .filter((s) => s.name === 'send OrderPlaced' && s.attributes['messaging.message.id'] === id);
        await waitFor(() => sends().length >= 1, 'the failed publish to end its span');
        serializer.failing = false;
        await waitFor(
          () => consumer.handled.some((h) => h.messageId === id),
          'the consumer to handle the retried message',
        );
        await waitFor(
          () => exporter.getFinishedSpans().some((s) => s.name === 'OrderPlaced process'),
          'the consumer span to end',
        );
        await waitFor(() => sends().length >= 2, 'the successful publish to end its span at the confirmation');
        const [failed, ...rest] = sends();
        expect(failed.status).toEqual({
          code: SpanStatusCode.ERROR,
          message: expect.stringContaining('cannot encode'),
        });
        expect(failed.attributes).toMatchObject({
          'error.type': 'Error',
          'messaging.message.id': id,
          'outbox.key': 'k-trace',
        });
        expect(failed.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
        const succeeded = rest.filter((s) => s.status.code !== SpanStatusCode.ERROR);
        expect(succeeded).toHaveLength(1);
        const span = exporter.getFinishedSpans().find((s) => s.name === 'OrderPlaced process')!;
        expect(span.parentSpanContext?.spanId).toBe(succeeded[0].spanContext().spanId);
      });

      it('stores no trace headers when no span is active, and the handler runs without a span', async () => {
        const { outbox } = fx;
        const id = await outbox.transaction(() => outbox.emit('OrderPlaced', { orderId: 2 }));
        const row = await fx.dataSource.getRepository(OutboxMessage).findOneByOrFail({ messageId: id });
        expect(row.headers).toBeNull();
        await waitFor(() => consumer.handled.some((h) => h.messageId === id), 'the consumer to handle OrderPlaced');
        expect(consumer.handled.find((h) => h.messageId === id)!.traceId).toBeUndefined();
        expect(exporter.getFinishedSpans().filter((s) => s.name === 'OrderPlaced process')).toEqual([]);
        expect(exporter.getFinishedSpans().filter((s) => s.name === 'send OrderPlaced')).toEqual([]);
      });
    },
  );
}
