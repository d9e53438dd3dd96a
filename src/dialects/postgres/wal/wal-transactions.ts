import type { ClaimedOutboxRow } from '../../outbox-dialect';

/** One committed transaction's outbox rows, in insert order, with the LSN to acknowledge once they are handled. */
export interface WalTransaction {
  rows: ClaimedOutboxRow[];
  /** Rows not due yet (written with a delay or `availableAt`), by `seq`: polling's. */
  delayed: Set<string>;
  /** The end of its commit record: acknowledging it tells the slot everything up to this commit is done. */
  commitEndLsn: string;
}

/** The decoded pgoutput messages the relay reads (`pg-logical-replication`'s `PgoutputPlugin`). */
type PgoutputMessage =
  | { tag: 'begin' }
  | { tag: 'insert'; new: Record<string, unknown> }
  | { tag: 'commit'; commitEndLsn: string | null }
  | { tag: string };

/**
 * Turns the stream's messages into committed transactions (pgoutput sends a transaction's changes between its
 * `begin` and `commit`, transactions in commit order) and queues them for the relay, with backpressure: `take()`
 * resolves only once fewer than `highWater` rows are queued, so the stream pauses (flow control) while the broker
 * is slower than the writers.
 */
export class WalTransactionQueue {
  private current?: { rows: ClaimedOutboxRow[]; delayed: Set<string> };
  private readonly ready: WalTransaction[] = [];
  private queuedRows = 0;
  private readonly drainWaiters: Array<() => void> = [];
  private readyWaiter?: () => void;
  /** Set once closed: `take()` and `next()` return at once. */
  private closed = false;

  constructor(private readonly highWater: number) {}

  /** Rows decoded but not yet taken by the relay. */
  get size(): number {
    return this.queuedRows + (this.current?.rows.length ?? 0);
  }

  /** Takes one decoded message; resolves once the queue has room again. */
  async take(message: PgoutputMessage): Promise<void> {
    if (message.tag === 'begin') this.current = { rows: [], delayed: new Set() };
    else if (message.tag === 'insert') {
      const values = (message as { new: Record<string, unknown> }).new;
      const tx = (this.current ??= { rows: [], delayed: new Set() });
      const row = walRow(values);
      tx.rows.push(row);
      if (Number(values.available_at) !== Number(values.created_at)) tx.delayed.add(row.seq);
    } else if (message.tag === 'commit') {
      const tx = this.current ?? { rows: [], delayed: new Set<string>() };
      this.current = undefined;
      const lsn = (message as { commitEndLsn: string | null }).commitEndLsn;
      if (lsn) {
        this.ready.push({ ...tx, commitEndLsn: lsn });
        this.queuedRows += tx.rows.length;
        this.readyWaiter?.();
      }
    }
    while (!this.closed && this.queuedRows >= this.highWater) {
      await new Promise<void>((resolve) => this.drainWaiters.push(resolve));
    }
  }

  /**
   * The next batch: whole transactions, up to `limit` rows (at least one transaction, however large). Waits for
   * one; `undefined` once closed.
   */
  async next(limit: number): Promise<WalTransaction[] | undefined> {
    while (!this.closed && this.ready.length === 0) {
      await new Promise<void>((resolve) => (this.readyWaiter = resolve));
      this.readyWaiter = undefined;
    }
    if (this.closed) return undefined;
    const batch: WalTransaction[] = [];
    let rows = 0;
    while (this.ready.length > 0 && (batch.length === 0 || rows + this.ready[0].rows.length <= limit)) {
      const tx = this.ready.shift()!;
      batch.push(tx);
      rows += tx.rows.length;
    }
    this.queuedRows -= rows;
    for (const wake of this.drainWaiters.splice(0)) wake();
    return batch;
  }

  /** True when nothing decoded waits (so a keepalive's LSN may be acknowledged). */
  get idle(): boolean {
    return this.ready.length === 0 && this.current === undefined;
  }

  close(): void {
    this.closed = true;
    this.readyWaiter?.();
    for (const wake of this.drainWaiters.splice(0)) wake();
  }
}

/**
 * A streamed insert as the publisher's row: attempts 1 (the one starting); its age and time left before expiry
 * measured on this process's clock against the database's `created_at` (the stream carries no "now").
 */
export function walRow(values: Record<string, unknown>): ClaimedOutboxRow {
  const text = (v: unknown) => (v === null || v === undefined ? null : String(v));
  const createdAt = Number(values.created_at);
  const ageMs = Math.max(0, Date.now() - createdAt);
  const expiresAt =
    values.expires_at === null || values.expires_at === undefined ? undefined : Number(values.expires_at);
  return {
    seq: String(values.seq),
    messageId: String(values.message_id),
    pattern: String(values.pattern),
    payload: String(values.payload),
    headers: text(values.headers),
    key: text(values.ordering_key),
    destination: text(values.destination) ?? '',
    attempts: Number(values.attempts ?? 0) + 1,
    ageMs,
    ...(expiresAt === undefined ? {} : { expiresInMs: expiresAt - createdAt - ageMs }),
    claimedAt: performance.now(),
  };
}
