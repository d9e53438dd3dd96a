import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type { OutboxPublishedEvent } from '../events/publisher-events';
import { describeError } from '../util/describe-error';
import { OUTBOX_CONSOLE_OPTIONS } from './console.constants';
import type { ResolvedOutboxConsoleOptions } from './console.options';
import { ConsoleOutbox, ConsoleOutboxes } from './console-outboxes';
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

/** The samples of one outbox and what its publisher published since the last one. */
class OutboxSamples {
  readonly samples: RingBuffer<ConsoleSample>;
  publishedSince = 0;
  lastAt = Date.now();
  failing = false;
  readonly onPublished = (event: OutboxPublishedEvent) => {
    this.publishedSince += event.messages.length;
  };

  constructor(
    readonly outbox: ConsoleOutbox,
    capacity: number,
  ) {
    this.samples = new RingBuffer(capacity);
  }
}

/**
 * Reads `OutboxService.stats()` of every outbox of the app every `sampleInterval` ms and counts each publisher's
 * `published` events, keeping the last `window` minutes per outbox in a ring buffer: the data behind the console's
 * chart, one query per outbox and interval however many pages are open. A failed read (database down) leaves a gap
 * and is logged once until reads of that outbox work again.
 */
@Injectable()
export class ConsoleSampler implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('OutboxConsole');
  private readonly byName = new Map<string, OutboxSamples>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    @Inject(OUTBOX_CONSOLE_OPTIONS) private readonly options: ResolvedOutboxConsoleOptions,
    private readonly outboxes: ConsoleOutboxes,
  ) {}

  onModuleInit(): void {
    const capacity = Math.max(1, Math.ceil((this.options.window * 60_000) / this.options.sampleInterval));
    for (const outbox of this.outboxes.all()) {
      const entry = new OutboxSamples(outbox, capacity);
      outbox.publisher.on('published', entry.onPublished);
      this.byName.set(outbox.name, entry);
    }
    this.timer = setInterval(() => void this.sampleAll(), this.options.sampleInterval);
    this.timer.unref();
    void this.sampleAll();
  }

  onModuleDestroy(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (const entry of this.byName.values()) entry.outbox.publisher.off('published', entry.onPublished);
  }

  /** Takes one sample of every outbox now (also called by the interval). */
  async sampleAll(): Promise<void> {
    await Promise.all([...this.byName.keys()].map((name) => this.sample(name)));
  }

  /** Takes one sample of the outbox `name` now. */
  async sample(name: string): Promise<ConsoleSample | undefined> {
    const entry = this.byName.get(name);
    if (!entry) return undefined;
    try {
      const stats = await entry.outbox.outbox.stats();
      const at = Date.now();
      const published = entry.publishedSince;
      entry.publishedSince = 0;
      const seconds = Math.max((at - entry.lastAt) / 1000, 0.001);
      entry.lastAt = at;
      const sample: ConsoleSample = {
        at,
        published,
        throughput: Math.round((published / seconds) * 100) / 100,
        lagMs: stats.oldestPendingAgeMs,
        pending: stats.pending,
        dead: stats.dead,
      };
      entry.samples.push(sample);
      entry.failing = false;
      return sample;
    } catch (error) {
      if (!entry.failing) {
        this.logger.warn(`Could not sample the stats of the outbox '${name}': ${describeError(error)}`);
      }
      entry.failing = true;
      return undefined;
    }
  }

  /** The samples of the outbox `name` of the last `minutes` minutes, oldest first. */
  series(name: string, minutes: number): ConsoleSample[] {
    const since = Date.now() - minutes * 60_000;
    return (this.byName.get(name)?.samples.toArray() ?? []).filter((s) => s.at >= since);
  }
}
