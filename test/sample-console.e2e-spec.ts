import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { createSampleApp } from '../sample/app';
import { DEFAULT_CONSOLE_TOKEN, parseBrokerUrl, readSampleConfig, SampleConfig } from '../sample/config';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from './helpers/databases';
import { freePort } from './helpers/ports';

/** The sample shop mounts the outbox console at /console behind its operator token (embedded defaults: SQLite + TCP). */
describe(`Sample shop: the outbox console at /console on ${DATABASE_LABEL.sqlite} + TCP`, () => {
  let db: TestDatabase;
  let app: INestApplication;
  const http = () => request(app.getHttpServer());
  const basic = (password: string) => `Basic ${Buffer.from(`operator:${password}`).toString('base64')}`;

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

  it('asks the browser for the operator token (401 + basic-auth challenge), refuses a wrong one (403)', async () => {
    const missing = await http().get('/console');
    expect(missing.status).toBe(401);
    expect(missing.headers['www-authenticate']).toMatch(/^Basic realm="outbox console"/);
    expect(missing.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect((await http().get('/console').set('Authorization', basic('wrong-token'))).status).toBe(403);
  });

  it('serves the page and its API with the default token (local use)', async () => {
    const page = await http().get('/console').set('Authorization', basic(DEFAULT_CONSOLE_TOKEN)).expect(200);
    expect(page.text).toContain('<title>Outbox console</title>');
    const summary = await http().get('/console/api/summary').set('x-console-token', DEFAULT_CONSOLE_TOKEN).expect(200);
    expect(summary.body).toMatchObject({ dead: 0, pending: expect.any(Number) });
  });

  it('reads CONSOLE_TOKEN from the environment and refuses one too short to be a secret', () => {
    expect(readSampleConfig({}).consoleToken).toBe(DEFAULT_CONSOLE_TOKEN);
    expect(readSampleConfig({ CONSOLE_TOKEN: 'a-long-operator-token' }).consoleToken).toBe('a-long-operator-token');
    expect(() => readSampleConfig({ CONSOLE_TOKEN: 'short' })).toThrow(/CONSOLE_TOKEN/);
  });
});
