import { WalPipeline } from './wal-pipeline';
import type { WalTransaction } from './wal-transactions';

/** A batch of one transaction ending at `lsn`, with one row per key (`null`: a row without key). */
function batch(lsn: string, keys: Array<string | null>): WalTransaction[] {
  const rows = keys.map((key, i) => ({
    seq: `${lsn}-${i}`,
    messageId: `${lsn}-${i}`,
    pattern: 'P',
    payload: '{}',
    headers: null,
    key,
    destination: '',
    attempts: 1,
  }));
  return [{ rows, delayed: new Set(), commitEndLsn: lsn }];
}

/** A pipeline whose batches finish when the test says so. */
function harness(limit: number) {
  const started: string[] = [];
  const acknowledged: string[] = [];
  const finish = new Map<string, { resolve: () => void; reject: (e: unknown) => void }>();
  const pipeline = new WalPipeline(
    limit,
    (b) =>
      new Promise<void>((resolve, reject) => {
        const lsn = b[b.length - 1].commitEndLsn;
        started.push(lsn);
        finish.set(lsn, { resolve, reject });
      }),
    async (lsn) => void acknowledged.push(lsn),
  );
  const tick = () => new Promise((r) => setImmediate(r));
  return { pipeline, started, acknowledged, finish, tick };
}

describe('WalPipeline', () => {
  it('keeps up to `limit` batches in hand and starts the next when one is done', async () => {
    const h = harness(2);
    await h.pipeline.push(batch('0/1', [null]));
    await h.pipeline.push(batch('0/2', [null]));
    const third = h.pipeline.push(batch('0/3', [null]));
    await h.tick();
    expect(h.started).toEqual(['0/1', '0/2']);
    h.finish.get('0/1')!.resolve();
    await third;
    expect(h.started).toEqual(['0/1', '0/2', '0/3']);
  });

  it('acknowledges in commit order: a later batch done first waits for the earlier ones', async () => {
    const h = harness(4);
    for (const lsn of ['0/1', '0/2', '0/3']) await h.pipeline.push(batch(lsn, [null]));
    h.finish.get('0/3')!.resolve();
    h.finish.get('0/2')!.resolve();
    await h.tick();
    expect(h.acknowledged).toEqual([]);
    expect(h.pipeline.idle).toBe(false);
    h.finish.get('0/1')!.resolve();
    await h.pipeline.drain();
    expect(h.acknowledged).toEqual(['0/3']); // one acknowledgement covers all three commits
    expect(h.pipeline.idle).toBe(true);
  });

  it('starts a batch with a key of a batch in hand only once that batch is done; other keys do not wait', async () => {
    const h = harness(4);
    await h.pipeline.push(batch('0/1', ['a', 'b']));
    const sameKey = h.pipeline.push(batch('0/2', ['c', 'b']));
    await h.tick();
    expect(h.started).toEqual(['0/1']);
    h.finish.get('0/1')!.resolve();
    await sameKey;
    await h.pipeline.push(batch('0/3', ['d', null]));
    expect(h.started).toEqual(['0/1', '0/2', '0/3']);
  });

  it('a failed batch rejects drain() and the next push(), and nothing after it is acknowledged', async () => {
    const h = harness(4);
    await h.pipeline.push(batch('0/1', [null]));
    await h.pipeline.push(batch('0/2', [null]));
    h.finish.get('0/2')!.resolve();
    h.finish.get('0/1')!.reject(new Error('statement failed'));
    await expect(h.pipeline.drain()).rejects.toThrow('statement failed');
    await expect(h.pipeline.push(batch('0/3', [null]))).rejects.toThrow('statement failed');
    expect(h.acknowledged).toEqual([]);
    expect(h.started).toEqual(['0/1', '0/2']);
  });
});
