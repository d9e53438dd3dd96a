import type { SchedulerRegistry } from '@nestjs/schedule';
import { stopRegisteredInterval } from '../scheduling/registered-interval';
import { outsideTransactionContext } from '../transaction/transaction-context';
import type { ClaimedBatch } from './publish-pass';

/** What the loop asks of the publisher: its (overridable) claim and settle steps, and where to report. */
export interface PublisherLoopSteps {
  /** Claims one batch, or resolves `undefined` when nothing is due. */
  claim(): Promise<ClaimedBatch | undefined>;
  /** Publishes a claimed batch and writes its outcome back. */
  settle(batch: ClaimedBatch): Promise<unknown>;
  /** A claim went through (ends an episode of failing passes). */
  claimed(): void;
  /** A claim or a batch failed (database unreachable, …). */
  failed(error: unknown): void;
}

/**
 * The publisher's scheduling: a poll every `pollingInterval` (registered in `SchedulerRegistry` when there is one),
 * coalesced requests for a pass, one claim at a time, and up to `maxBatchesInFlight` claimed batches publishing in
 * the background. The next claim starts as soon as a batch's publishes are under way, so a commit never waits for
 * an earlier batch's broker confirmations; rows of an in-flight batch stay claimed, so no row is taken twice and a
 * key's later rows wait for its earlier ones.
 */
export class PublisherLoop {
  /** Set while stopping (and before starting again): no claim starts, and no row of a claimed batch starts. */
  stopped = false;
  private timer?: NodeJS.Timeout;
  /** Batches claimed by the loop whose publishes or completion writes are still running. */
  private readonly inFlight = new Set<Promise<void>>();
  /** The loop's claim in progress (at most one at a time). */
  private claiming?: Promise<void>;
  /** A pass was asked for (poll, wake-up, a full batch, a batch that may have unblocked keys). */
  private wanted = false;
  private wakeScheduled = false;

  constructor(
    private readonly steps: PublisherLoopSteps,
    private readonly limits: { batchSize: number; maxBatchesInFlight: number },
  ) {}

  /** Number of claimed batches still publishing or being marked. */
  get batchesInFlight(): number {
    return this.inFlight.size;
  }

  /** Starts polling: `tick` every `interval` ms, registered in `registry` (when given) as `name`. */
  start(interval: number, tick: () => void, registry: SchedulerRegistry | undefined, name: string): void {
    this.stopped = false;
    // Not unref()ed: like an @nestjs/schedule interval, the loop keeps a publisher-only worker alive until the app
    // closes (stop() clears it).
    this.timer = setInterval(tick, interval);
    registry?.addInterval(name, this.timer);
  }

  /** Stops polling and claiming at once; `drain()` then waits for what is under way. */
  stop(registry: SchedulerRegistry | undefined, name: string): void {
    this.stopped = true;
    if (this.timer) {
      stopRegisteredInterval(registry, name, this.timer);
      this.timer = undefined;
    }
  }

  /** Resolves once the claim in progress and every batch in flight have settled. */
  async drain(): Promise<void> {
    await this.claiming;
    await Promise.all([...this.inFlight]);
  }

  /** Asks for a pass: claims now unless a claim is running or `maxBatchesInFlight` batches are in flight. */
  request(): void {
    if (this.stopped) return;
    this.wanted = true;
    this.pump();
  }

  /** Runs `tick` on the next turn of the event loop, outside the caller's transaction; coalesced. */
  soon(tick: () => void): void {
    if (this.wakeScheduled) return;
    this.wakeScheduled = true;
    outsideTransactionContext(() =>
      setImmediate(() => {
        this.wakeScheduled = false;
        tick();
      }),
    );
  }

  private pump(): void {
    if (!this.wanted || this.claiming || this.stopped || this.inFlight.size >= this.limits.maxBatchesInFlight) return;
    this.wanted = false;
    this.claiming = outsideTransactionContext(() => this.launch()).finally(() => {
      this.claiming = undefined;
      this.pump();
    });
  }

  /** Claims one batch and lets it publish and complete in the background. */
  private async launch(): Promise<void> {
    let claim: ClaimedBatch | undefined;
    try {
      claim = await this.steps.claim();
      this.steps.claimed();
    } catch (error) {
      this.wanted = false; // the next poll retries; no tight loop while the database is down
      this.steps.failed(error);
      return;
    }
    if (!claim) return;
    if (claim.rows.length >= this.limits.batchSize) this.wanted = true;
    const keyed = claim.rows.some((r) => r.key !== null);
    const batch: Promise<void> = this.steps
      .settle(claim)
      .then(
        () => {
          // Later rows of this batch's keys waited for it: look for them now rather than at the next poll.
          if (keyed) this.wanted = true;
        },
        (error) => this.steps.failed(error),
      )
      .finally(() => {
        this.inFlight.delete(batch);
        this.pump();
      });
    this.inFlight.add(batch);
  }
}
