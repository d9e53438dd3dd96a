/**
 * Child process of the fault suite: a RabbitMQ consumer (`noAck: false`, prefetch 1) under `@Idempotent({ retry })`
 * whose outbox relay runs the failed messages again from their inbox rows (no broker client: the inbox rows are its
 * only destinations). Every run of the handler is signalled (`run`, with the message id and whether it came from
 * the broker or from the row); the test SIGKILLs the process at two moments it waits for:
 * - `hangAfterRollback`: the message side's `storeFailedMessage` step — the handler has failed and rolled back, the
 *   inbox row is not stored yet — signals `rolled-back` and never returns for these message ids (the app replaces
 *   the export of `src/idempotency/message-inbox.ts`; nothing in src knows about it);
 * - `hangOnRetry`: a run from the row of one of these message ids signals `hang` and never returns (the relay's
 *   claim and the attempt's transaction stay open).
 */
import 'reflect-metadata';
import { Controller, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, EventPattern, Payload, RmqContext } from '@nestjs/microservices';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { DataSourceOptions } from 'typeorm';
import {
  getOutboxMessageId,
  Idempotent,
  OutboxModule,
  OutboxModuleOptions,
  OutboxRetryContext,
  OutboxService,
} from '../../../src';
import * as messageInbox from '../../../src/idempotency/message-inbox';
import { childConfig, signal } from '../support/child-app';
import { FAULT_ENTITIES, FaultEffect } from '../support/entities';
import { rmqServer } from '../support/rabbitmq';

export interface RetryConsumerAppConfig {
  db: DataSourceOptions;
  queue: string;
  retry: { maxAttempts: number; initialDelay: number; factor: number; maxDelay: number; jitter: number };
  publisher: OutboxModuleOptions['publisher'];
  /** Message ids whose first delivery's failure hangs between the rollback and the stored row. */
  hangAfterRollback?: string[];
  /** Message ids whose runs from the inbox row hang inside the handler. */
  hangOnRetry?: string[];
}

/** What the test publishes: `poison` always fails; `transient` fails until its row's attempt `succeedsAt`. */
export interface RetryLedgerMessage {
  n: number;
  poison?: boolean;
  succeedsAt?: number;
}

export const RETRY_LEDGER_PATTERN = 'RetryLedger';
export const RETRY_LEDGER_DESTINATION = 'consumer:RetryLedger.onLedger';

const forever = () => new Promise<never>(() => undefined);

async function main(): Promise<void> {
  const config = childConfig<RetryConsumerAppConfig>();
  const hangAfterRollback = new Set(config.hangAfterRollback ?? []);
  const hangOnRetry = new Set(config.hangOnRetry ?? []);

  // One step of `@Idempotent()` held: the window between the rollback and the stored row. The message side calls
  // the module's export at each failure, so replacing the export holds it.
  const inbox = messageInbox as unknown as { storeFailedMessage: typeof messageInbox.storeFailedMessage };
  const storeFailed = inbox.storeFailedMessage;
  inbox.storeFailedMessage = (target, context, call, error, logger) => {
    if (!hangAfterRollback.has(call.key)) return storeFailed(target, context, call, error, logger);
    signal('rolled-back', { id: call.key });
    return forever();
  };

  @Controller()
  class RetryLedger {
    constructor(private readonly outbox: OutboxService) {}

    @EventPattern(RETRY_LEDGER_PATTERN)
    @Idempotent({ manualAck: true, retryAfter: 0, retry: config.retry })
    async onLedger(@Payload() data: RetryLedgerMessage, @Ctx() context: RmqContext | OutboxRetryContext) {
      const id = getOutboxMessageId(data, context) ?? `no-id:${data.n}`;
      const fromRow = context instanceof OutboxRetryContext;
      const attempt = fromRow ? context.getAttempts() : 1;
      signal('run', { id, fromRow, attempt });
      await this.outbox.manager.insert(FaultEffect, { source: id }); // rolled back when the run fails
      if (fromRow && hangOnRetry.has(id)) {
        signal('hang', { id, attempt });
        await forever();
      }
      if (data.poison) throw new Error(`ledger rejects message ${data.n}`);
      if (data.succeedsAt !== undefined && (!fromRow || attempt < data.succeedsAt)) {
        throw new Error(`message ${data.n} not yet (attempt ${attempt})`);
      }
    }
  }
  @Module({
    imports: [
      TypeOrmModule.forRoot({
        ...config.db,
        entities: FAULT_ENTITIES,
        autoLoadEntities: true,
        synchronize: false,
        logging: false,
      } as any),
      TypeOrmModule.forFeature(FAULT_ENTITIES),
      ScheduleModule.forRoot(),
      OutboxModule.forRoot({ publisher: config.publisher }),
    ],
    controllers: [RetryLedger],
  })
  class RetryConsumerAppModule {}

  const app = await NestFactory.createMicroservice(RetryConsumerAppModule, {
    ...rmqServer(config.queue, 1),
    logger: ['error'],
  });
  app.enableShutdownHooks();
  await app.listen();
  signal('ready', { pid: process.pid });
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
