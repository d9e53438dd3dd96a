import type { OutboxDatabase } from '../dialects/outbox-database';
import { runOnConnection } from '../transaction/transaction-runner';
import type { ClaimedOutboxRow } from '../dialects/outbox-dialect';
import type { BrokerPace } from './broker-pace';
import type { ClaimedBatch } from './publish-pass';

/**
 * Keeps a claimed batch's lease alive while it waits for a broker's confirm. From a third of `leaseMs` after the
 * claim, and every third of `leaseMs` after that until `end()`, the lease of the batch's rows is extended to `leaseMs`
 * from now — as long as one of its publishes waits for its confirm (`waiting`) — on the database clock and fenced by
 * the claim's owner token: no other publisher takes the rows over (and publishes them again) while their first
 * publish may still be confirmed, a late confirm above all. A prompt batch ends before the first extension and costs
 * nothing; other work (an in-process handler) keeps the lease it was claimed with. Extensions stop after `maxHoldMs` (a publish never waits longer for
 * its confirm), so a delivery that hangs for good cannot hold its rows for ever. Each extension that kept every row
 * moves `batch.leaseDeadline` on; one that failed (database down) is tried again at the next tick, and a lost lease
 * is caught by the fenced completion writes.
 */
export class BatchLease {
  private readonly timer: NodeJS.Timeout;
  private readonly started = Date.now();
  private extending?: Promise<void>;
  private ended = false;
  /** Set when a confirm of this batch was late (for the relay's pace). */
  late = false;
  /** Publishes of this batch waiting for their broker's confirm. */
  waiting = 0;

  constructor(
    private readonly database: OutboxDatabase,
    private readonly batch: ClaimedBatch,
    private readonly leaseMs: number,
    private readonly maxHoldMs: number,
  ) {
    this.timer = setInterval(() => this.extend(), Math.max(100, Math.floor(leaseMs / 3)));
    this.timer.unref();
  }

  /** Local time by which the lease has surely ended (moved on by each extension that kept every row). */
  get deadline(): number {
    return this.batch.leaseDeadline;
  }

  /** The batch's publishes are over: stops extending, after the extension under way. */
  async end(): Promise<void> {
    this.ended = true;
    clearInterval(this.timer);
    await this.extending;
  }

  private extend(): void {
    if (Date.now() - this.started > this.maxHoldMs) clearInterval(this.timer);
    if (this.extending || this.ended || this.waiting === 0 || Date.now() - this.started > this.maxHoldMs) return;
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

/**
 * The publisher's leases of the batches in flight, by row: what a row's confirm wait tells (`waiting`, `late`) reaches
 * its batch's lease, and a late confirm slows the pace down.
 */
export class BatchLeases {
  private readonly byRow = new WeakMap<ClaimedOutboxRow, BatchLease>();

  constructor(
    private readonly database: OutboxDatabase,
    private readonly pace: BrokerPace,
    private readonly leaseMs: number,
    private readonly maxHoldMs: number,
  ) {}

  /** Starts keeping `batch`'s lease; `end()` it once its publishes are over. */
  start(batch: ClaimedBatch): BatchLease {
    const lease = new BatchLease(this.database, batch, this.leaseMs, this.maxHoldMs);
    for (const row of batch.rows) this.byRow.set(row, lease);
    return lease;
  }

  /** The lease of `row`'s batch, while it is published. */
  of(row: ClaimedOutboxRow): BatchLease | undefined {
    return this.byRow.get(row);
  }

  /** One of `row`'s publishes starts (`true`) or stops (`false`) waiting for its confirm. */
  waiting(row: ClaimedOutboxRow, waiting: boolean): void {
    const lease = this.byRow.get(row);
    if (lease) lease.waiting += waiting ? 1 : -1;
  }

  /** A confirm of `row` is late on a connected client: its batch tells the pace, which slows down. */
  late(row: ClaimedOutboxRow): void {
    const lease = this.byRow.get(row);
    if (lease) lease.late = true;
    this.pace.confirmLate();
  }
}
