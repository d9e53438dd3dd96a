import { INestApplication, Logger, LoggerService, LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MicroserviceOptions, Transport } from '@nestjs/microservices';
import { OutboxEnvelopeDeserializer, OutboxJetStreamServer } from 'nestjs-outbox';
import { SampleAppModule } from './app.module';
import type { SampleBroker, SampleConfig } from './config';
import { ProblemDetailsFilter } from './http/problem-details.filter';
import { sampleValidationPipe } from './http/validation';
import { ensureSampleStream } from './jetstream';

/**
 * Builds the shop as a hybrid app: the HTTP API, plus the `OrderPlaced` consumer as a microservice of the same
 * process on the configured broker. Start it with `startSampleApp()` (or `init()` in tests).
 */
export async function createSampleApp(
  config: SampleConfig,
  options: { logger?: LoggerService | LogLevel[] | false } = {},
): Promise<INestApplication> {
  if (config.broker.jetStream) await ensureSampleStream(config.broker.options, config.broker.jetStream.stream);
  const app = await NestFactory.create(SampleAppModule.forRoot(config), {
    logger: options.logger,
    abortOnError: false,
  });
  app.useGlobalPipes(sampleValidationPipe());
  app.useGlobalFilters(new ProblemDetailsFilter(app.getHttpAdapter()));
  app.connectMicroservice<MicroserviceOptions>(consumerOptions(config.broker));
  app.enableShutdownHooks();
  return app;
}

/**
 * Starts the shop: HTTP first, then the consumer, not awaited. Nest's RabbitMQ server resolves
 * `startAllMicroservices()` only once it is connected (it retries for ever), so awaiting it before `listen()` would
 * keep HTTP closed while the broker is down — when an outbox should accept orders and keep their events until the
 * broker is back. Resolves once HTTP listens; `consumer` settles when the consumer has started, and a consumer that
 * fails to start is logged, not thrown (HTTP keeps serving).
 */
export async function startSampleApp(
  app: INestApplication,
  port: number,
  host?: string,
): Promise<{ consumer: Promise<boolean> }> {
  await (host === undefined ? app.listen(port) : app.listen(port, host));
  const consumer = app.startAllMicroservices().then(
    () => true,
    (error: unknown) => {
      const reason = error instanceof Error ? error.message : String(error);
      new Logger('SampleShop').error(`The consumer did not start: ${reason}`);
      return false;
    },
  );
  return { consumer };
}

/** The consumer's side of the broker: the producer's connection options plus what a safe consumer needs. */
export function consumerOptions(broker: SampleBroker): MicroserviceOptions {
  if (broker.jetStream) {
    // A durable JetStream consumer: acknowledged once the handler's transaction committed, redelivered otherwise.
    const { stream, consumer } = broker.jetStream;
    const connection = broker.options;
    return { strategy: new OutboxJetStreamServer({ connection, stream, consumer, filterSubjects: ['OrderPlaced'] }) };
  }
  switch (broker.transport) {
    case Transport.TCP:
    case Transport.REDIS:
      // No header channel on these transports: the outbox wraps each message in an envelope carrying its id,
      // which this deserializer unwraps (the handler gets the payload; @Idempotent() gets the id).
      return {
        transport: broker.transport,
        options: { ...broker.options, deserializer: new OutboxEnvelopeDeserializer() },
      } as MicroserviceOptions;
    case Transport.RMQ:
      // Acknowledge after the handler's transaction committed, not on delivery: with auto-ack a crash mid-handler
      // loses the message, and the dedup record protects nothing.
      return {
        transport: Transport.RMQ,
        options: { ...broker.options, noAck: false, prefetchCount: 20 },
      } as MicroserviceOptions;
    case Transport.MQTT:
      return {
        transport: Transport.MQTT,
        options: { ...broker.options, subscribeOptions: { qos: 1 } },
      } as MicroserviceOptions;
    default:
      return { transport: broker.transport, options: { ...broker.options } } as MicroserviceOptions;
  }
}
