import type { Logger } from '@nestjs/common';
import type { OutboxDatabase } from '../dialects/outbox-database';
import { type OutboxStreamRelay, resolveStreamRelay, type WalRelayHost } from '../dialects/resolve-wal-relay';
import { OutboxWalUnavailableError } from '../errors';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { describeError } from '../util/describe-error';

/**
 * The publisher's `publisher.mode`. With `'poll'` it does nothing. With `'wal'` / `'wal-or-poll'` it starts the
 * database's stream relay at bootstrap (PostgreSQL logical decoding: one reader per slot across replicas) and,
 * while it is engaged, tells polling to leave the rows the stream has in hand (`handoffMs`). When the database
 * cannot stream, `'wal'` fails the start-up with `OutboxWalUnavailableError` and `'wal-or-poll'` logs why and
 * polls; a slot lost while running makes either log it and poll everything.
 */
export class WalMode {
  private relay?: OutboxStreamRelay;
  private engaged = false;

  constructor(
    private readonly options: ResolvedOutboxOptions,
    private readonly database: OutboxDatabase,
    private readonly logger: Logger,
  ) {}

  /** True while the stream relay is in charge of new rows (in this process or another replica). */
  get active(): boolean {
    return this.engaged;
  }

  /** True while this process is the one that streams. */
  get streaming(): boolean {
    return this.engaged && (this.relay?.streaming ?? false);
  }

  /** What polling must leave to the stream (see `ClaimRequest.walHandoffMs`), or `undefined`: take every row. */
  get handoffMs(): number | undefined {
    return this.engaged ? this.options.publisher.walHandoff : undefined;
  }

  /** The slot's lag while engaged (see `OutboxStreamRelay.lag()`). */
  async lag(): Promise<{ lagBytes: number; retainedBytes: number } | undefined> {
    if (!this.engaged || !this.relay) return undefined;
    const lag = await this.relay.lag();
    return lag && { lagBytes: lag.lagBytes, retainedBytes: lag.retainedBytes };
  }

  /** Starts the stream relay (bootstrap), or decides to poll; `onFallBack` runs when streaming ends for good. */
  async start(host: Omit<WalRelayHost, 'fellBack'>, onFallBack: () => void): Promise<void> {
    const { mode, batchSize, maxBatchesInFlight, leaseDuration, pollingInterval } = this.options.publisher;
    if (mode === 'poll') return;
    try {
      const history = { publisher: this.options.publisher.instanceId, limit: this.options.retry.historyLimit };
      const { relay, created } = await resolveStreamRelay(this.database, {
        batchSize,
        maxBatchesInFlight,
        leaseMs: leaseDuration,
        deleteOnPublish: this.options.cleanup.deleteOnPublish,
        history,
        retryMs: Math.max(pollingInterval, 500),
      });
      this.relay = relay;
      if (created) this.logger.log(`Made the publication and replication slot ${relay.slot} for the WAL relay.`);
    } catch (error) {
      if (mode === 'wal' || !(error instanceof OutboxWalUnavailableError)) {
        throw error instanceof OutboxWalUnavailableError
          ? error
          : new OutboxWalUnavailableError(
              `The WAL relay could not start: ${describeError(error)}. Fix the cause, or use publisher.mode 'poll'.`,
            );
      }
      this.logger.warn(`publisher.mode 'wal-or-poll': polling, as the WAL relay cannot start. ${error.message}`);
      return;
    }
    this.engaged = true;
    if (!this.options.publisher.enabled) return;
    this.relay.start(
      {
        ...host,
        fellBack: (reason) => {
          this.engaged = false;
          this.logger.error(reason);
          onFallBack();
        },
      },
      this.logger,
    );
  }

  /** Stops streaming (after the batch in hand). */
  async stop(): Promise<void> {
    await this.relay?.stop();
  }
}
