import {
  CanActivate,
  ExecutionContext,
  INestApplication,
  Injectable,
  Module,
  UnauthorizedException,
} from '@nestjs/common';
import { ClientsModule } from '@nestjs/microservices';
import { RmqRecordSerializer } from '@nestjs/microservices/serializers/rmq-record.serializer';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { OutboxModule, OutboxModuleOptions, OutboxNonRetryableError } from '../../src';
import { OutboxConsoleOptions } from '../../src/console/console.options';
import { OutboxConsoleModule } from '../../src/console/outbox-console.module';
import { twoDataSources } from '../fixtures/two-data-sources';
import { outboxTestingModuleBuilder } from '../fixtures/outbox-app';
import type { TestDatabase } from './databases';
import { rmqClientOptions } from './consumers';

/** The operator's token the console tests' guard accepts, in the `x-console-token` header. */
export const CONSOLE_TOKEN = 'operator-token-for-tests';

/** A guard like an app would write: no token → 401, a wrong token → 403. */
@Injectable()
export class TokenGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const token = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers[
      'x-console-token'
    ];
    if (token === undefined) throw new UnauthorizedException('Send the operator token in x-console-token.');
    return token === CONSOLE_TOKEN;
  }
}

/** A password in a broker URL that must never reach the console (it is in every failure's error text). */
export const BROKER_SECRET = 'hunter2-broker-secret';

/**
 * The RabbitMQ client's serializer, failing for good (`OutboxNonRetryableError`, so the message goes dead at its
 * first attempt) for every payload with `fail: '<reason>'` while `failing` holds; the error names a broker URL with
 * a password, like a driver's error would.
 */
export class FailingSerializer extends RmqRecordSerializer {
  failing = true;
  serialize(packet: any): any {
    const data = packet?.data?.data ?? packet?.data;
    if (data?.fail && this.failing) {
      throw new OutboxNonRetryableError(`${data.fail}: refused by amqp://ops:${BROKER_SECRET}@broker.internal:5672`);
    }
    return super.serialize(packet);
  }
}

export interface ConsoleAppOptions {
  db: TestDatabase;
  queue: string;
  serializer: FailingSerializer;
  platform?: 'express' | 'fastify';
  console?: OutboxConsoleOptions;
  outbox?: Omit<OutboxModuleOptions, 'client'>;
}

/** An outbox app publishing to RabbitMQ `queue` through `serializer`, with the console mounted (TokenGuard). */
export async function startConsoleApp(options: ConsoleAppOptions): Promise<INestApplication> {
  const moduleRef = await outboxTestingModuleBuilder({
    db: options.db,
    client: rmqClientOptions(options.queue, undefined, { serializer: options.serializer }),
    outbox: { publisher: { pollingInterval: 50 }, ...options.outbox },
    imports: [OutboxConsoleModule.forRoot(options.console ?? { guard: TokenGuard, sampleInterval: 250 })],
  }).compile();
  const app: INestApplication =
    options.platform === 'fastify'
      ? moduleRef.createNestApplication(new FastifyAdapter(), { logger: false })
      : moduleRef.createNestApplication({ logger: false });
  try {
    await app.init();
    if (options.platform === 'fastify')
      await (app.getHttpAdapter().getInstance() as { ready(): Promise<unknown> }).ready();
  } catch (error) {
    await app.close().catch(() => undefined);
    throw error;
  }
  return app;
}

export interface TwoOutboxConsoleAppOptions {
  /** The default DataSource's database (the 'orders' outbox of the tests). */
  ordersDb: TestDatabase;
  /** The database of the DataSource named 'billing'. */
  billingDb: TestDatabase;
  queues: { orders: string; billing: string };
  serializers: { orders: FailingSerializer; billing: FailingSerializer };
  console?: OutboxConsoleOptions;
}

/**
 * An app with two outboxes — the default DataSource's and one of the DataSource 'billing' — each publishing to its
 * own RabbitMQ queue through its own failing serializer, neither imported globally, and one console (TokenGuard).
 */
export async function startTwoOutboxConsoleApp(options: TwoOutboxConsoleAppOptions): Promise<INestApplication> {
  const relay = { publisher: { pollingInterval: 50 } };
  const { queues, serializers } = options;
  @Module({
    imports: [
      ...twoDataSources(options.ordersDb, options.billingDb),
      ClientsModule.register([
        { name: 'ORDERS_BROKER', ...rmqClientOptions(queues.orders, undefined, { serializer: serializers.orders }) },
        { name: 'BILLING_BROKER', ...rmqClientOptions(queues.billing, undefined, { serializer: serializers.billing }) },
      ] as never),
      ScheduleModule.forRoot(),
      OutboxModule.forRoot({ client: 'ORDERS_BROKER', ...relay }),
      OutboxModule.forRoot({ dataSource: 'billing', client: 'BILLING_BROKER', ...relay }),
      OutboxConsoleModule.forRoot(options.console ?? { guard: TokenGuard, sampleInterval: 250 }),
    ],
  })
  class TwoOutboxConsoleAppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [TwoOutboxConsoleAppModule] }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  try {
    await app.init();
  } catch (error) {
    await app.close().catch(() => undefined);
    throw error;
  }
  return app;
}
