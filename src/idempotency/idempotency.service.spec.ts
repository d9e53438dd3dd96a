import { type IdempotencyAttempt, type IdempotencyBegin, rollbackQuietly, RunningKeys } from './idempotency.service';
import { FirstTimes } from './idempotency.problems';

const attempt = (): IdempotencyAttempt => ({
  context: {} as IdempotencyAttempt['context'],
  run: (work) => work(),
  commit: async () => true,
  commitWithoutRecord: async () => undefined,
  rollback: async () => {
    throw new Error('connection lost');
  },
});
const acquired = async (): Promise<IdempotencyBegin> => ({ kind: 'acquired', attempt: attempt() });

describe('RunningKeys', () => {
  it('answers a key this process holds in flight without asking the database, until its attempt ends', async () => {
    const keys = new RunningKeys();
    const first = await keys.take('s', 'k', 'print', acquired);
    expect(first.kind).toBe('acquired');
    const database = jest.fn(acquired);
    expect(await keys.take('s', 'k', 'print', database)).toEqual({ kind: 'in-flight', sameRequest: true });
    expect(await keys.take('s', 'k', 'other', database)).toEqual({ kind: 'in-flight', sameRequest: false });
    expect(database).not.toHaveBeenCalled();
    // Another scope, another key: the database decides.
    expect((await keys.take('t', 'k', 'print', database)).kind).toBe('acquired');
    // A rollback that fails still frees the key.
    await expect(first.kind === 'acquired' && first.attempt.rollback()).rejects.toThrow('connection lost');
    expect((await keys.take('s', 'k', 'print', database)).kind).toBe('acquired');
  });

  it('forgets only its own entry: a late end of an earlier attempt leaves the next holder in place', async () => {
    const keys = new RunningKeys();
    const first = await keys.take('s', 'k', 'a', acquired);
    if (first.kind !== 'acquired') throw new Error('expected acquired');
    await first.attempt.commit({ fingerprint: 'a', status: 201, body: null, headers: null, ttl: 1000 });
    const second = await keys.take('s', 'k', 'b', acquired);
    expect(second.kind).toBe('acquired');
    await first.attempt.commitWithoutRecord(); // ends again, late
    expect(await keys.take('s', 'k', 'b', acquired)).toEqual({ kind: 'in-flight', sameRequest: true });
  });
});

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
