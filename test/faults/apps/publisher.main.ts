/**
 * Child process of the fault suite: an app whose OutboxPublisher relays the outbox to RabbitMQ. With `produce`, it
 * also writes orders with their events (the single-process variant), resuming after a kill from the orders that
 * committed. Killed with SIGKILL by the test at random moments and started again.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ClientsModule } from '@nestjs/microservices';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { OutboxModule, OutboxModuleOptions, OutboxService } from '../../../src';
import { TestOrder } from '../../fixtures/order.entity';
import { childConfig, signal } from '../support/child-app';
import { rmqClient } from '../support/rabbitmq';

export interface PublisherAppConfig {
  db: DataSourceOptions;
  queue: string;
  /** Create the tables at start (when the test did not). */
  synchronize?: boolean;
  rmqUrl?: string;
  publisher?: OutboxModuleOptions['publisher'];
  retry?: OutboxModuleOptions['retry'];
  /** Also write this many orders (each with one OrderPlaced event, in one transaction), `concurrency` at a time. */
  produce?: { total: number; concurrency: number };
}

async function main(): Promise<void> {
  const config = childConfig<PublisherAppConfig>();

  @Module({
    imports: [
      TypeOrmModule.forRoot({
        ...config.db,
        entities: [TestOrder],
        autoLoadEntities: true,
        synchronize: config.synchronize ?? false,
        logging: false,
      } as any),
      ClientsModule.register([{ name: 'BROKER', ...rmqClient(config.queue, config.rmqUrl) }]),
      ScheduleModule.forRoot(),
      OutboxModule.forRoot({ client: 'BROKER', publisher: config.publisher, retry: config.retry }),
    ],
  })
  class PublisherAppModule {}

  const app = await NestFactory.createApplicationContext(PublisherAppModule, { logger: ['error', 'warn', 'log'] });
  app.enableShutdownHooks();
  await app.init();
  signal('ready', { pid: process.pid });
  if (config.produce) await produce(app.get(OutboxService), app.get(DataSource), config.produce);
}

/** Writes the orders that are not written yet. Order `n` has reference `order-n`; a kill rolls back the one in flight. */
async function produce(
  outbox: OutboxService,
  ds: DataSource,
  { total, concurrency }: { total: number; concurrency: number },
) {
  const done = new Set(
    (await ds.getRepository(TestOrder).find({ select: { reference: true } })).map((o) => o.reference),
  );
  const todo = Array.from({ length: total }, (_, n) => `order-${n}`).filter((r) => !done.has(r));
  let next = 0;
  const worker = async () => {
    while (next < todo.length) {
      const reference = todo[next++];
      await outbox.transaction(async (manager) => {
        const order = await manager.save(TestOrder, { reference, amount: 1 });
        await outbox.emit('OrderPlaced', { orderId: order.id, reference }, { key: `customer-${order.id % 50}` });
      });
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  signal('produced', { total });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
