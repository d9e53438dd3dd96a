import { type IdempotencyAttempt, rollbackQuietly } from './idempotency.service';
import { FirstTimes } from './idempotency.problems';

describe('rollbackQuietly()', () => {
  const attempt = (rollback: () => Promise<void>) => ({ rollback }) as unknown as IdempotencyAttempt;

  it('rolls the attempt back', async () => {
    const rollback = jest.fn(async () => undefined);
    const warn = jest.fn();
    await rollbackQuietly(attempt(rollback), { warn });
    expect(rollback).toHaveBeenCalledTimes(1);
    expect(warn).not.toHaveBeenCalled();
  });

  it('logs a rollback that fails too instead of throwing it, so the handler’s error is the one answered', async () => {
    const warn = jest.fn();
    await expect(
      rollbackQuietly(
        attempt(() => Promise.reject(new Error('Connection terminated'))),
        { warn },
      ),
    ).resolves.toBeUndefined();
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('Rollback failed: Connection terminated'));
  });
});

describe('FirstTimes (warnings logged once per handler)', () => {
  it('answers true the first time for each subject, false ever after', () => {
    const warned = new FirstTimes();
    expect([warned.first('A.create'), warned.first('A.create'), warned.first('B.create')]).toEqual([true, false, true]);
    expect(warned.first('B.create')).toBe(false);
  });
});
