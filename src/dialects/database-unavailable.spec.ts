import { createServer } from 'node:net';
import { Client } from 'pg';
import { createConnection } from 'mysql2/promise';
import { QueryFailedError } from 'typeorm';
import { isDatabaseUnavailable } from './database-unavailable';

/** A port of 127.0.0.1 that nobody listens on (taken, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A server that accepts connections and drops them at once (a proxy whose upstream is gone). */
async function droppingPort(): Promise<{ port: number; close: () => Promise<void> }> {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { port, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (error: unknown) => error,
  );

describe('isDatabaseUnavailable', () => {
  it('recognizes what pg throws for a refused and for a dropped connection', async () => {
    const refused = await failure(new Client({ host: '127.0.0.1', port: await closedPort() }).connect());
    expect(refused).toHaveProperty('message');
    expect(isDatabaseUnavailable(refused)).toBe(true);
    const dropping = await droppingPort();
    try {
      const dropped = await failure(new Client({ host: '127.0.0.1', port: dropping.port }).connect());
      expect(dropped).toHaveProperty('message');
      expect(isDatabaseUnavailable(dropped)).toBe(true);
    } finally {
      await dropping.close();
    }
  });

  it('recognizes what mysql2 throws for a refused connection', async () => {
    const refused = await failure(createConnection({ host: '127.0.0.1', port: await closedPort(), user: 'root' }));
    expect(refused).toHaveProperty('message');
    expect(isDatabaseUnavailable(refused)).toBe(true);
  });

  it('looks through TypeORM’s QueryFailedError, `cause` and AggregateError', () => {
    const lost = Object.assign(new Error('Connection lost: The server closed the connection.'), {
      code: 'PROTOCOL_CONNECTION_LOST',
    });
    expect(isDatabaseUnavailable(new QueryFailedError('SELECT 1', [], lost))).toBe(true);
    expect(
      isDatabaseUnavailable(new Error('wrapped', { cause: Object.assign(new Error('x'), { code: '57P01' }) })),
    ).toBe(true);
    expect(
      isDatabaseUnavailable(new AggregateError([Object.assign(new Error('connect'), { code: 'ECONNREFUSED' })])),
    ).toBe(true);
  });

  it('leaves a busy database to isDatabaseBusy: a pool wait or lock timeout is not an outage', () => {
    expect(isDatabaseUnavailable(new Error('timeout exceeded when trying to connect'))).toBe(false);
    expect(isDatabaseUnavailable(Object.assign(new Error('lock timeout'), { code: '55P03' }))).toBe(false);
    expect(isDatabaseUnavailable(Object.assign(new Error('queue'), { code: 'POOL_ENQUEUELIMIT' }))).toBe(false);
    // pg-pool's failed connect of a new client (not a wait for a pooled one) stays an outage.
    expect(isDatabaseUnavailable(new Error('Connection terminated due to connection timeout'))).toBe(true);
  });

  it('leaves every other error alone (bugs and bad data must surface)', () => {
    const unique = Object.assign(new Error('duplicate key value violates unique constraint'), { code: '23505' });
    expect(isDatabaseUnavailable(new QueryFailedError('INSERT', [], unique))).toBe(false);
    expect(isDatabaseUnavailable(Object.assign(new Error('syntax'), { code: 'ER_PARSE_ERROR' }))).toBe(false);
    expect(isDatabaseUnavailable(new TypeError('x is undefined'))).toBe(false);
    expect(isDatabaseUnavailable(undefined)).toBe(false);
    const cycle: { cause?: unknown } = new Error('cycle');
    cycle.cause = cycle;
    expect(isDatabaseUnavailable(cycle)).toBe(false);
  });
});
