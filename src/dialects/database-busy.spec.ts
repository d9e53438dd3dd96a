import { createServer, Socket } from 'node:net';
import { Pool } from 'pg';
import { QueryFailedError } from 'typeorm';
import { DatabaseBusyError, isDatabaseBusy } from './database-busy';
import { isDatabaseUnavailable } from './database-unavailable';

describe('isDatabaseBusy', () => {
  it('recognizes lock waits, statement timeouts and full pools of PostgreSQL and MySQL/MariaDB', () => {
    const code = (c: string) => Object.assign(new Error(c), { code: c });
    for (const c of ['55P03', '57014', '53300', 'ER_LOCK_WAIT_TIMEOUT', 'ER_CON_COUNT_ERROR', 'POOL_ENQUEUELIMIT'])
      expect(isDatabaseBusy(code(c))).toBe(true);
    expect(isDatabaseBusy(Object.assign(new Error('Lock wait timeout exceeded'), { errno: 1205 }))).toBe(true);
    expect(isDatabaseBusy(new QueryFailedError('INSERT', [], code('55P03')))).toBe(true);
    expect(isDatabaseBusy(new Error('wrapped', { cause: new DatabaseBusyError('no connection') }))).toBe(true);
  });

  it('tells pg-pool’s wait for a pooled client (busy) from its failed connect of a new one (unreachable)', async () => {
    // A server that accepts connections and never answers: pg-pool's only client never finishes connecting.
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    const pool = new Pool({ host: '127.0.0.1', port, max: 1, connectionTimeoutMillis: 100 });
    pool.on('error', () => undefined);
    const failure = (promise: Promise<unknown>) =>
      promise.then(
        () => undefined,
        (error: unknown) => error,
      );
    try {
      const [connecting, waiting] = await Promise.all([failure(pool.connect()), failure(pool.connect())]);
      expect((connecting as Error).message).toBe('Connection terminated due to connection timeout');
      expect(isDatabaseBusy(connecting)).toBe(false);
      expect(isDatabaseUnavailable(connecting)).toBe(true);
      expect((waiting as Error).message).toBe('timeout exceeded when trying to connect');
      expect(isDatabaseBusy(waiting)).toBe(true);
      expect(isDatabaseUnavailable(waiting)).toBe(false);
    } finally {
      await pool.end().catch(() => undefined);
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('leaves every other error alone', () => {
    expect(isDatabaseBusy(Object.assign(new Error('unique'), { code: '23505' }))).toBe(false);
    expect(isDatabaseBusy(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }))).toBe(false);
    expect(isDatabaseBusy(new Error('Query read timeout'))).toBe(false);
    expect(isDatabaseBusy(undefined)).toBe(false);
  });
});
