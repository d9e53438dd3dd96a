import type { HttpServer, INestApplication, NestApplicationOptions } from '@nestjs/common';
import type { TestingModuleBuilder } from '@nestjs/testing';
import { OutboxTestAppOptions, outboxTestingModuleBuilder } from '../fixtures/outbox-app';
import type { TestDatabase } from './databases';

/** What an e2e app is made of, besides its database: see `OutboxTestAppOptions`, plus how it boots. */
export interface StartOutboxAppOptions extends Omit<OutboxTestAppOptions, 'db'> {
  /** Nest's logger for the app (`false` silences it, a list keeps those levels). Default: Nest's default logger. */
  logger?: NestApplicationOptions['logger'];
  /** Changes the testing module before it compiles (provider overrides, `deliverEveryMessageTwice`, …). */
  adjust?: (builder: TestingModuleBuilder) => TestingModuleBuilder;
  /** The HTTP adapter (e.g. `new FastifyAdapter()`). Default: Express. */
  adapter?: HttpServer;
  /** Runs after the app is created and before `init()` (connect and start a microservice, …). */
  beforeInit?: (app: INestApplication) => Promise<void> | void;
}

/**
 * Boots one app on `db`: TypeORM (synchronize) + ClientsModule 'BROKER' + ScheduleModule + OutboxModule, then
 * `init()`. An app that fails to start is closed before the error is rethrown. `close()` may be called more than
 * once (a fixture closes at teardown what a test has not closed itself).
 */
export async function startOutboxApp(db: TestDatabase, options: StartOutboxAppOptions = {}): Promise<INestApplication> {
  const { logger, adjust = (b) => b, beforeInit, adapter, ...module } = options;
  const moduleRef = await adjust(outboxTestingModuleBuilder({ db, ...module })).compile();
  const appOptions = logger === undefined ? undefined : { logger };
  const app = adapter
    ? moduleRef.createNestApplication(adapter, appOptions)
    : moduleRef.createNestApplication(appOptions);
  const close = app.close.bind(app);
  let closing: Promise<void> | undefined;
  app.close = () => (closing ??= close());
  try {
    await beforeInit?.(app);
    await app.init();
  } catch (error) {
    await app.close().catch(() => undefined);
    throw error;
  }
  return app;
}
