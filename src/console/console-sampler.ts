import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type { OutboxPublishedEvent } from '../events/publisher-events';
import { OutboxService } from '../outbox/outbox.service';
import { OutboxPublisher } from '../publisher/outbox-publisher';
import { describeError } from '../util/describe-error';
import { OUTBOX_CONSOLE_OPTIONS } from './console.constants';
import type { ResolvedOutboxConsoleOptions } from './console.options';
import { RingBuffer } from './ring-buffer';

/** One point of the console's chart. */
export interface ConsoleSample {
  /** When it was taken, epoch milliseconds (this process's clock). */
  at: number;
  /** Messages this process's publisher published since the previous sample. */
  published: number;
  /** `published` per second over the interval. */
  throughput: number;
  /** Age in ms of the oldest pending row (the relay's lag). */
  lagMs: number;
  pending: number;
  dead: number;
}

/**
 * Reads `OutboxService.stats()` every `sampleInterval` ms and counts the publisher's `published` events, keeping
 * the last `window` minutes in a ring buffer: the data behind the console's chart, one query per interval however
 * many pages are open. A failed read (database down) leaves a gap and is logged once until reads work again.
 */
@Injectable()
export class ConsoleSampler implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('OutboxConsole');
  private readonly samples: RingBuffer<ConsoleSample>;
  private timer: NodeJS.Timeout | undefined;
  private publishedSince = 0;
  private lastAt = Date.now();
  private failing = false;
  private readonly onPublished = (event: OutboxPublishedEvent) => {
    this.publishedSince += event.messages.length;
  };

  constructor(
    @Inject(OUTBOX_CONSOLE_OPTIONS) private readonly options: ResolvedOutboxConsoleOptions,
    private readonly outbox: OutboxService,
    private readonly publisher: OutboxPublisher,
  ) {
    this.samples = new RingBuffer(Math.max(1, Math.ceil((options.window * 60_000) / options.sampleInterval)));
  }

  onModuleInit(): void {
    this.publisher.on('published', this.onPublished);
    this.timer = setInterval(() => void this.sample(), this.options.sampleInterval);
    this.timer.unref();
    void this.sample();
  }

  onModuleDestroy(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.publisher.off('published', this.onPublished);
  }

  /** Takes one sample now (also called by the interval). */
  async sample(): Promise<ConsoleSample | undefined> {
    try {
      const stats = await this.outbox.stats();
      const at = Date.now();
      const published = this.publishedSince;
      this.publishedSince = 0;
      const seconds = Math.max((at - this.lastAt) / 1000, 0.001);
      this.lastAt = at;
      const sample: ConsoleSample = {
        at,
        published,
        throughput: Math.round((published / seconds) * 100) / 100,
        lagMs: stats.oldestPendingAgeMs,
        pending: stats.pending,
        dead: stats.dead,
      };
      this.samples.push(sample);
      this.failing = false;
      return sample;
    } catch (error) {
      if (!this.failing) this.logger.warn(`Could not sample the outbox's stats: ${describeError(error)}`);
      this.failing = true;
      return undefined;
    }
  }

  /** The samples of the last `minutes` minutes, oldest first. */
  series(minutes: number): ConsoleSample[] {
    const since = Date.now() - minutes * 60_000;
    return this.samples.toArray().filter((s) => s.at >= since);
  }
}
