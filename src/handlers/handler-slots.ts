/**
 * Bounds how many in-process handler transactions run at once, so a batch of hundreds of messages does not take
 * every pooled connection (a handler that opened a second connection while the pool is empty would wait forever).
 */
export class HandlerSlots {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly limit: number) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.running >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.running++;
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}

/** Handler transactions run at once per publisher: below the default pool size of the TypeORM drivers (10). */
export const HANDLER_CONCURRENCY = 4;
