import type { QueryRunner } from 'typeorm';
import { isDatabaseBusy } from '../dialects/database-busy';
import { connectWithin } from './held-transaction';

/** A runner whose pool hands its connection over when the test says so. */
function slowRunner() {
  let handOver!: (connection: object) => void;
  const runner = {
    connect: jest.fn(() => new Promise<object>((resolve) => (handOver = resolve))),
    release: jest.fn(async () => undefined),
  };
  return { runner: runner as unknown as QueryRunner & typeof runner, handOver: (c: object) => handOver(c) };
}

describe('connectWithin', () => {
  it('resolves with the connection when it comes in time', async () => {
    const { runner, handOver } = slowRunner();
    const connected = connectWithin(runner, 1000);
    handOver({ id: 1 });
    await expect(connected).resolves.toEqual({ id: 1 });
    expect(runner.release).not.toHaveBeenCalled();
  });

  it('gives up after the timeout with a busy error naming the fix, and gives a late connection back', async () => {
    const { runner, handOver } = slowRunner();
    const error = await connectWithin(runner, 20).catch((e: unknown) => e);
    expect(isDatabaseBusy(error)).toBe(true);
    expect((error as Error).message).toMatch(/within 20 ms \(idempotency\.connectionTimeout\).*pool size/);
    expect(runner.release).not.toHaveBeenCalled();
    handOver({ id: 2 });
    await new Promise((resolve) => setImmediate(resolve));
    expect(runner.release).toHaveBeenCalledTimes(1);
  });

  it('passes a failed connect on as it is', async () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const runner = { connect: async () => Promise.reject(refused), release: async () => undefined };
    await expect(connectWithin(runner as unknown as QueryRunner, 1000)).rejects.toBe(refused);
  });
});
