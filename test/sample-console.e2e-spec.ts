import request from 'supertest';
import { DEFAULT_CONSOLE_TOKEN, readSampleConfig } from '../sample/config';
import { DATABASE_LABEL } from './helpers/databases';
import { useEmbeddedSample } from './helpers/embedded-sample';

/** The sample shop mounts the outbox console at /console behind its operator token (embedded defaults: SQLite + TCP). */
describe(`Sample shop: the outbox console at /console on ${DATABASE_LABEL.sqlite} + TCP`, () => {
  const app = useEmbeddedSample();
  const http = () => request(app().getHttpServer());
  const basic = (password: string) => `Basic ${Buffer.from(`operator:${password}`).toString('base64')}`;

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
