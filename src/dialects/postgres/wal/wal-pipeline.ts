import type { WalTransaction } from './wal-transactions';

/** One batch being handled: its keys, its last commit, and whether it is done. */
interface InFlight {
  keys: Set<string>;
  lsn: string;
  done: boolean;
  settled: Promise<void>;
}

/**
 * Keeps up to `limit` streamed batches in hand at once — each published, then written back, while the next ones
 * are already on their way to the broker — as polling keeps `maxBatchesInFlight` claimed batches. Two rules keep
 * what the serial reader guaranteed:
 *
 * - **Per-key order.** A batch that has a row of a key an earlier batch in hand also has waits until that batch is
 *   done, so the earlier row's outcome (sent, or failed and so holding its key back) is written before the later
 *   row is looked at. Rows without a key never wait for each other.
 * - **Acknowledged in commit order.** The slot is told a commit is done (`acknowledge`) only once every batch up to
 *   it is done: a later batch that finishes first waits for the earlier ones. A batch that fails rejects `drain()`
 *   (and the next `push()`); the session then ends and the slot replays from the last acknowledged commit.
 */
export class WalPipeline {
  private readonly inFlight: InFlight[] = [];
  private failure: { error: unknown } | undefined;

  constructor(
    private readonly limit: number,
    private readonly handle: (batch: WalTransaction[]) => Promise<void>,
    private readonly acknowledge: (lsn: string) => Promise<void>,
  ) {}

  /** True when no batch is in hand (a keepalive's LSN may then be acknowledged). */
  get idle(): boolean {
    return this.inFlight.length === 0;
  }

  /** Starts handling `batch` once there is room and no batch in hand shares a key with it. */
  async push(batch: WalTransaction[]): Promise<void> {
    const keys = keysOf(batch);
    for (;;) {
      this.throwIfFailed();
      const waitFor = this.inFlight.filter((b) => !b.done && sharesKey(b.keys, keys));
      if (waitFor.length === 0 && this.inFlight.length < this.limit) break;
      await Promise.race((waitFor.length > 0 ? waitFor : this.pending()).map((b) => b.settled));
    }
    const entry: InFlight = { keys, lsn: batch[batch.length - 1].commitEndLsn, done: false, settled: undefined! };
    entry.settled = this.handle(batch)
      .then(() => this.completed(entry))
      .catch((error: unknown) => {
        this.failure ??= { error };
      });
    this.inFlight.push(entry);
  }

  /** Resolves once every batch in hand is done and acknowledged; rejects with the first failure. */
  async drain(): Promise<void> {
    while (this.inFlight.length > 0 && !this.failure) await Promise.race(this.pending().map((b) => b.settled));
    this.throwIfFailed();
  }

  /**
   * The batches still being handled. Never empty while batches are in hand: the first one in hand is never done
   * (a done batch at the front is acknowledged and removed at once), so a race on these always waits.
   */
  private pending(): InFlight[] {
    return this.inFlight.filter((b) => !b.done);
  }

  private async completed(entry: InFlight): Promise<void> {
    entry.done = true;
    let last: string | undefined;
    while (this.inFlight.length > 0 && this.inFlight[0].done) last = this.inFlight.shift()!.lsn;
    if (last !== undefined) await this.acknowledge(last);
  }

  private throwIfFailed(): void {
    if (this.failure) throw this.failure.error;
  }
}

function keysOf(batch: WalTransaction[]): Set<string> {
  const keys = new Set<string>();
  for (const tx of batch) for (const row of tx.rows) if (row.key !== null) keys.add(row.key);
  return keys;
}

function sharesKey(a: Set<string>, b: Set<string>): boolean {
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  for (const key of small) if (large.has(key)) return true;
  return false;
}
