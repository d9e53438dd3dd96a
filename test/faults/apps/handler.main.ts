/**
 * Child process of the fault suite: an outbox without a broker whose publisher runs an in-process
 * `@OnOutboxEvent('Crashable')` handler. The handler writes its effect (a `test_orders` row) in its transaction and
 * signals `handler` before it returns; with `hangOn` it then never returns for that reference (the test kills the
 * process inside the handler's open transaction). Killed with SIGKILL by the test and started again.
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { DataSourceOptions } from 'typeorm';
import { OnOutboxEvent, OutboxEventContext, OutboxModule, OutboxModuleOptions, OutboxService } from '../../../src';
import { TestOrder } from '../../fixtures/order.entity';
import { childConfig, signal } from '../support/child-app';

export interface HandlerAppConfig {
  db: DataSourceOptions;
  /** The handler never returns for a message with this reference (after writing its effect). */
  hangOn?: string;
  publisher?: OutboxModuleOptions['publisher'];
  retry?: OutboxModuleOptions['retry'];
}

async function main(): Promise<void> {
  const config = childConfig<HandlerAppConfig>();

  @Injectable()
  class CrashableHandler {
    constructor(private readonly outbox: OutboxService) {}

    @OnOutboxEvent('Crashable')
    async handle(payload: { ref: string }, context: OutboxEventContext): Promise<void> {
      await this.outbox.manager.insert(TestOrder, { reference: payload.ref, amount: context.attempts });
      signal('handler', { ref: payload.ref, messageId: context.messageId, attempts: context.attempts });
      if (payload.ref === config.hangOn) await new Promise(() => undefined);
    }
  }

  @Module({
    imports: [
      TypeOrmModule.forRoot({ ...config.db, entities: [TestOrder], autoLoadEntities: true, logging: false } as any),
      ScheduleModule.forRoot(),
      OutboxModule.forRoot({ publisher: config.publisher, retry: config.retry }),
    ],
    providers: [CrashableHandler],
  })
  class HandlerAppModule {}

  const app = await NestFactory.createApplicationContext(HandlerAppModule, { logger: ['error', 'warn'] });
  app.enableShutdownHooks();
  await app.init();
  signal('ready', { pid: process.pid });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
