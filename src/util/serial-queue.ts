/**
 * Runs tasks one at a time, in arrival order. Used to serialize the transactions of a DataSource whose
 * connections are really one (SQLite): concurrent callers queue instead of failing with "cannot start a
 * transaction within a transaction". (A promise chain is all this needs; no mutex library is pulled in for it.)
 */
export class SerialQueue {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.tail.then(task, task);
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}
