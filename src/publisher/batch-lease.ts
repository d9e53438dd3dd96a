import type { OutboxDatabase } from '../dialects/outbox-database';
import { runOnConnection } from '../transaction/transaction-runner';
import type { ClaimedBatch } from './publish-pass';

/**
 * Keeps a claimed batch's lease alive while one of its confirms is late. `keep()` extends the lease of the batch's
 * rows at once, on the database clock and fenced by the claim's owner token, then every third of `leaseMs` until
 * `end()`: no other publisher takes the rows over (and publishes them again) while their first publish may still
 * be confirmed. Each extension that kept every row moves `batch.leaseDeadline` on; one that failed (database down)
 * is tried again at the next tick, and a lost lease is caught by the fenced completion writes.
 */
export class BatchLease {
  private timer?: NodeJS.Timeout;
  private extending?: Promise<void>;
  private ended = false;
  /** True once a late confirm asked to keep the lease. */
  kept = false;

  constructor(
    private readonly database: OutboxDatabase,
    private readonly batch: ClaimedBatch,
    private readonly leaseMs: number,
  ) {}

  /** Local time by which the lease has surely ended (moved on by each extension that kept every row). */
  get deadline(): number {
    return this.batch.leaseDeadline;
  }

  /** A confirm of this batch is late: extend the lease now and keep extending it until `end()`. */
  keep(): void {
    if (this.timer || this.ended) return;
    this.kept = true;
    this.extend();
    this.timer = setInterval(() => this.extend(), Math.max(100, Math.floor(this.leaseMs / 3)));
    this.timer.unref();
  }

  /** The batch's publishes are over: stops extending, after the extension under way. */
  async end(): Promise<void> {
    this.ended = true;
    clearInterval(this.timer);
    await this.extending;
  }

  private extend(): void {
    if (this.extending || this.ended) return;
    const { dataSource, dialect, table } = this.database;
    const seqs = this.batch.rows.map((r) => r.seq);
    // The database evaluates its clock after this instant: the new lease surely lasts until `started + leaseMs`.
    const started = Date.now();
    this.extending = runOnConnection(dataSource, (m) =>
      dialect.extendLease(m, table, this.batch.owner, seqs, this.leaseMs),
    )
      .then((extended) => {
        if (extended === seqs.length) this.batch.leaseDeadline = started + this.leaseMs;
      })
      .catch(() => undefined)
      .finally(() => (this.extending = undefined));
  }
}
