import type { ClaimedOutboxRow } from '../dialects/outbox-dialect';
import { OutboxNonRetryableError } from '../errors';
import { resolveOutboxOptions } from '../outbox.options-validation';
import { OutboxRelayRegistry } from '../scheduling/outbox-relay.registry';
import { OutboxPublisher } from './outbox-publisher';

/** The batch step alone: which rows start, in which order, and what happens to the rest of a failing key. */
class BatchOnly extends OutboxPublisher {
  readonly log: string[] = [];
  failing = new Set<string>();

  constructor() {
    super(
      resolveOutboxOptions({ client: 'BROKER', publisher: { publishTimeout: 1000, leaseDuration: 5000 } }),
      {} as never,
      {} as never,
      new OutboxRelayRegistry(),
    );
  }

  protected override async publish(_client: unknown, row: ClaimedOutboxRow): Promise<void> {
    this.log.push(`start ${row.messageId}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
    this.log.push(`end ${row.messageId}`);
    if (this.failing.has(row.messageId)) throw new OutboxNonRetryableError('broken');
  }

  run(rows: ClaimedOutboxRow[], leaseDeadline = Date.now() + 5000) {
    return this.publishBatch({} as never, rows, leaseDeadline);
  }
}

const row = (messageId: string, key: string | null, seq: number): ClaimedOutboxRow => ({
  seq: String(seq),
  messageId,
  pattern: 'E',
  payload: '{}',
  headers: null,
  key,
  destination: '',
  attempts: 1,
});

describe('OutboxPublisher.publishBatch', () => {
  it('publishes unkeyed rows in parallel and each key in sequence; a failure stops only its key', async () => {
    const publisher = new BatchOnly();
    publisher.failing.add('a2');
    const rows = [
      row('u1', null, 1),
      row('a1', 'A', 2),
      row('u2', null, 3),
      row('a2', 'A', 4),
      row('b1', 'B', 5),
      row('a3', 'A', 6),
      row('b2', 'B', 7),
    ];
    const outcome = await publisher.run(rows);

    expect(outcome.sent.map((r) => r.messageId).sort()).toEqual(['a1', 'b1', 'b2', 'u1', 'u2']);
    expect(outcome.failures.map((f) => [f.row.messageId, f.failure.dead])).toEqual([['a2', true]]);
    expect(outcome.unstarted.map((r) => r.messageId)).toEqual(['a3']);

    const at = (event: string) => publisher.log.indexOf(event);
    // Unkeyed rows and the heads of both keys start before anything ends.
    const firstEnd = publisher.log.findIndex((e) => e.startsWith('end'));
    for (const id of ['u1', 'u2', 'a1', 'b1']) expect(at(`start ${id}`)).toBeLessThan(firstEnd);
    // Within a key, the next row starts only after the previous one ended.
    expect(at('start a2')).toBeGreaterThan(at('end a1'));
    expect(at('start b2')).toBeGreaterThan(at('end b1'));
    expect(at('start a3')).toBe(-1);
  });

  it('starts no publish once the lease has less than publishTimeout left, leaving the rows unstarted', async () => {
    const publisher = new BatchOnly();
    const outcome = await publisher.run([row('u1', null, 1), row('k1', 'K', 2)], Date.now() + 1200);
    expect(outcome.sent).toEqual([]);
    expect(outcome.unstarted.map((r) => r.messageId).sort()).toEqual(['k1', 'u1']);
  });
});
