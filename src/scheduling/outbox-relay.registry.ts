import { Injectable } from '@nestjs/common';
import { OutboxConfigurationError } from '../errors';
import type { OutboxEventPayload, OutboxPublisherEvents } from '../events/publisher-events';
import type { DeadLetterTrier } from '../outbox/dead-letter-trial.types';

/**
 * What the write side (`OutboxService`, `OutboxDeadLetters`) asks of its outbox's relay, without importing it:
 * implemented by `OutboxPublisher`, which registers itself in `OutboxRelayRegistry`.
 */
export interface OutboxRelay {
  /** Asks for a publish pass as soon as possible (after a commit that wrote outbox rows). A hint only. */
  wake(): void;
  /** Runs publish passes until nothing is due; resolves with the number of messages published. */
  flush(): Promise<number>;
  /** True while the broker confirms late (see `OutboxPublisher.brokerSlow`). */
  readonly brokerSlow: boolean;
  /** True when `event` has a listener or a diagnostics-channel subscriber. */
  isWatched(event: keyof OutboxPublisherEvents): boolean;
  /** Reports dead messages made pending again (the `requeued` event). */
  reportRequeued(event: OutboxEventPayload<'requeued'>): void;
}

/** Where an outbox's relay registers itself (when it is constructed), for the write side to reach it. */
@Injectable()
export class OutboxRelayRegistry {
  private current?: OutboxRelay;
  private readonly triers: DeadLetterTrier[] = [];

  register(relay: OutboxRelay): void {
    this.current = relay;
  }

  /** Adds a trier of dead rows (`OutboxDeadLetters.dryRun()`); the latest added that accepts a row tries it. */
  addTrier(trier: DeadLetterTrier): void {
    this.triers.unshift(trier);
  }

  /** The trier of the dead rows of `destination`, if one was added. */
  trierOf(destination: string): DeadLetterTrier | undefined {
    return this.triers.find((trier) => trier.accepts(destination));
  }

  /** The registered relay; throws `OutboxConfigurationError` when none is (the outbox was not built by Nest). */
  get relay(): OutboxRelay {
    if (!this.current) {
      throw new OutboxConfigurationError(
        'This outbox has no publisher: get OutboxService and OutboxDeadLetters from the app (OutboxModule provides ' +
          'them with their OutboxPublisher), not with new.',
      );
    }
    return this.current;
  }
}
