/**
 * Child process of the JetStream consumer test: a Nest microservice on `OutboxJetStreamServer` whose `@Idempotent()`
 * handler applies a NON-idempotent increment plus one effect row per message. Reports every delivery as a signal
 * line. `{ hang: true }` makes its first delivery hang mid-handler (transaction open) for the test to SIGKILL;
 * `{ poison: true }` always fails; `{ invalid: true }` is terminated by the handler (`context.term()`), which then fails.
 */
import 'reflect-metadata';
import { existsSync, writeFileSync } from 'node:fs';
import {
  CallHandler,
  Controller,
  ExecutionContext,
  Injectable,
  Module,
  NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { DataSourceOptions } from 'typeorm';
import {
  getOutboxMessageId,
  Idempotent,
  OutboxJetStreamContext,
  OutboxJetStreamServer,
  OutboxModule,
  OutboxService,
} from '../../../src';
import { TestOrder } from '../../fixtures/order.entity';
import { childConfig, signal } from '../support/child-app';
import { FAULT_ENTITIES, FaultCounter, FaultEffect } from '../support/entities';

export interface JetStreamConsumerConfig {
  db: DataSourceOptions;
  servers: string[];
  stream: string;
  consumer: string;
  subject: string;
  /** File written when a handler hangs: a later incarnation (after the SIGKILL) applies the message instead. */
  hangMarker: string;
}

export const APPLIED = 'applied';

/** Outermost interceptor: reports every delivery, before `@Idempotent()` decides anything (duplicates too). */
@Injectable()
class DeliveryTap implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler) {
    const rpc = context.switchToRpc().getContext<OutboxJetStreamContext>();
    const { deliveryCount: delivery, streamSequence: seq } = rpc.getMessage().info;
    signal('delivery', { id: getOutboxMessageId(context), delivery, seq, pid: process.pid });
    return next.handle();
  }
}

async function main(): Promise<void> {
  const config = childConfig<JetStreamConsumerConfig>();

  @Controller()
  @UseInterceptors(DeliveryTap)
  class JetStreamOrderConsumer {
    constructor(private readonly outbox: OutboxService) {}

    @EventPattern(config.subject)
    @Idempotent()
    async onOrder(
      @Payload() data: { hang?: boolean; poison?: boolean; invalid?: boolean },
      @Ctx() context: OutboxJetStreamContext,
    ): Promise<void> {
      const id = getOutboxMessageId(data, context);
      const delivery = context.getMessage().info.deliveryCount;
      if (data.invalid) {
        context.term();
        throw new Error('invalid order: terminated');
      }
      if (data.poison) throw new Error('poison: this order can never be applied');
      const manager = this.outbox.manager;
      await manager.increment(FaultCounter, { name: APPLIED }, 'value', 1);
      await manager.insert(FaultEffect, { source: id ?? 'no-id' });
      if (data.hang && !existsSync(config.hangMarker)) {
        writeFileSync(config.hangMarker, String(delivery));
        signal('hanging', { id });
        await new Promise(() => undefined);
      }
    }
  }

  @Module({
    imports: [
      TypeOrmModule.forRoot({
        ...config.db,
        entities: [TestOrder, ...FAULT_ENTITIES],
        autoLoadEntities: true,
        synchronize: false,
        logging: false,
      } as any),
      TypeOrmModule.forFeature(FAULT_ENTITIES),
      OutboxModule.forRoot({ publisher: { enabled: false } }),
    ],
    controllers: [JetStreamOrderConsumer],
  })
  class JetStreamConsumerModule {}

  const app = await NestFactory.createMicroservice(JetStreamConsumerModule, {
    strategy: new OutboxJetStreamServer({
      connection: { servers: config.servers },
      stream: config.stream,
      consumer: config.consumer,
      ackWait: 2_000,
      nakDelay: 100,
      maxDeliveries: 3,
    }),
    logger: ['error', 'warn'],
  });
  await app.listen();
  signal('ready', { pid: process.pid });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
