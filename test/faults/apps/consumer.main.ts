/**
 * Child process of the fault suite: the RabbitMQ consumer (`noAck: false`) with the `@Idempotent()` handler of
 * support/order-consumer.ts. Reports every delivery as a signal line; killed with SIGKILL mid-batch by the test.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { DataSourceOptions } from 'typeorm';
import { OutboxModule } from '../../../src';
import { TestOrder } from '../../fixtures/order.entity';
import { childConfig, signal } from '../support/child-app';
import { FAULT_ENTITIES } from '../support/entities';
import { deliverySink, OrderConsumer } from '../support/order-consumer';
import { rmqServer } from '../support/rabbitmq';

export interface ConsumerAppConfig {
  db: DataSourceOptions;
  queue: string;
  prefetch: number;
}

async function main(): Promise<void> {
  const config = childConfig<ConsumerAppConfig>();
  deliverySink.report = (d) => signal('delivery', { id: d.messageId, redelivered: d.redelivered });

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
      ScheduleModule.forRoot(),
      OutboxModule.forRoot({ publisher: { enabled: false } }),
    ],
    controllers: [OrderConsumer],
  })
  class ConsumerAppModule {}

  const app = await NestFactory.createMicroservice(ConsumerAppModule, {
    ...rmqServer(config.queue, config.prefetch),
    logger: ['error', 'warn'],
  });
  await app.listen();
  signal('ready', { pid: process.pid });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
