import type { INestApplication } from '@nestjs/common';
import { createSampleApp } from '../../sample/app';
import { parseBrokerUrl, SampleConfig } from '../../sample/config';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from './databases';
import { freePort } from './ports';

/**
 * The sample shop on its embedded defaults (a fresh SQLite file, TCP to a free port), started before the suite's
 * tests and closed after them. Returns a getter: the app exists once `beforeAll` has run.
 */
export function useEmbeddedSample(): () => INestApplication {
  let db: TestDatabase | undefined;
  let app: INestApplication | undefined;
  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    const config: SampleConfig = {
      port: 0,
      database: db.options,
      databaseLabel: DATABASE_LABEL.sqlite,
      broker: parseBrokerUrl(`tcp://127.0.0.1:${await freePort()}`, ''),
    };
    app = await createSampleApp(config, { logger: ['error'] });
    await app.startAllMicroservices();
    await app.listen(0, '127.0.0.1');
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });
  return () => {
    if (!app) throw new Error('useEmbeddedSample(): the app starts in beforeAll; use it inside a test.');
    return app;
  };
}
