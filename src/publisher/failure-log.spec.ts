import type { ClaimedOutboxRow, OutboxFailure } from '../dialects/outbox-dialect';
import { PublishFailureLog } from './failure-log';

/** A failure log with a logger that records lines by level, and the events it sends. */
class ReportOnly {
  readonly lines: Array<{ level: string; message: string }> = [];
  readonly seen: string[] = [];
  private readonly log: PublishFailureLog;

  constructor() {
    const record = (level: string) => (message: string) => this.lines.push({ level, message });
    const logger = { warn: record('warn'), error: record('error'), log: record('log'), debug: record('debug') };
    this.log = new PublishFailureLog(logger, (event, payload) => {
      if (event === 'retry' || event === 'dead')
        this.seen.push(`${event} ${(payload as unknown as { messageId: string }).messageId}`);
    });
  }

  /** Reports one completed batch the way the publisher's complete() does. */
  batch(sent: number, failures: Array<{ id: string; error: string; dead?: boolean }>) {
    const rows = failures.map(({ id, error, dead }) => ({ row: row(id), failure: failure(id, error, dead) }));
    for (const { row: r, failure: f } of rows) this.log.messageFailed(r, f);
    this.log.batchCompleted({
      sent: Array.from({ length: sent }, (_, i) => row(`ok${i}`)),
      failures: rows,
      unstarted: [],
    });
  }

  count(level: string) {
    return this.lines.filter((l) => l.level === level).length;
  }
}

const row = (messageId: string): ClaimedOutboxRow => ({
  seq: '1',
  messageId,
  pattern: 'E',
  payload: '{}',
  headers: null,
  key: null,
  destination: '',
  attempts: 1,
});
const failure = (id: string, error: string, dead = false): OutboxFailure => ({
  seq: id,
  error,
  dead,
  retryDelay: dead ? 0 : 200,
});
const outage = (n: number, error = 'Error: Connection closed') =>
  Array.from({ length: n }, (_, i) => ({ id: `m${i}`, error }));

describe('PublishFailureLog', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it('writes one warning for a whole failing backlog, per-message lines at debug only, and keeps every retry event', () => {
    const publisher = new ReportOnly();
    publisher.batch(0, outage(500));
    publisher.batch(0, outage(500));
    expect(publisher.count('warn')).toBe(1);
    expect(publisher.lines.find((l) => l.level === 'warn')!.message).toMatch(
      /500 attempt\(s\) in 1 batch\(es\).*Connection closed/,
    );
    expect(publisher.count('debug')).toBe(1000);
    expect(publisher.seen.filter((e) => e.startsWith('retry'))).toHaveLength(1000);
  });

  it('repeats the same failure at most every 30 s with the count since the last report, a new error after 5 s', () => {
    const publisher = new ReportOnly();
    for (let s = 0; s < 60; s++) {
      publisher.batch(0, outage(100));
      jest.advanceTimersByTime(1000);
    }
    // t = 0 s and t = 30 s.
    expect(publisher.count('warn')).toBe(2);
    expect(publisher.lines.filter((l) => l.level === 'warn')[1].message).toMatch(
      /3000 attempt\(s\) in 30 batch\(es\) failed since the last report/,
    );
    publisher.batch(0, outage(10, 'OutboxPublishTimeoutError: No confirmation within 2000 ms'));
    expect(publisher.count('warn')).toBe(3);
    publisher.batch(0, outage(10, 'Error: Connection closed'));
    expect(publisher.count('warn')).toBe(3);
  });

  it('logs one recovery line when a batch goes through after a reported failure, nothing for a clean batch', () => {
    const publisher = new ReportOnly();
    publisher.batch(10, []);
    expect(publisher.lines).toHaveLength(0);
    publisher.batch(0, outage(50));
    jest.advanceTimersByTime(2000);
    publisher.batch(50, []);
    publisher.batch(50, []);
    const recovered = publisher.lines.filter((l) => l.level === 'log');
    expect(recovered).toHaveLength(1);
    expect(recovered[0].message).toMatch(/recovered after 2000 ms: 50 failed attempt/);
  });

  it('stays bounded while the broker flaps (a failure right after each success)', () => {
    const publisher = new ReportOnly();
    for (let i = 0; i < 100; i++) {
      publisher.batch(0, outage(5));
      publisher.batch(5, []);
      jest.advanceTimersByTime(100);
    }
    // 10 s of flapping: a warning at most every 5 s, a recovery line only after a warned episode.
    expect(publisher.count('warn')).toBeLessThanOrEqual(3);
    expect(publisher.count('log')).toBeLessThanOrEqual(3);
  });

  it('still logs every dead-lettered message as an error', () => {
    const publisher = new ReportOnly();
    publisher.batch(0, [
      { id: 'd1', error: 'OutboxNonRetryableError: bad', dead: true },
      { id: 'd2', error: 'OutboxNonRetryableError: bad', dead: true },
    ]);
    expect(publisher.count('error')).toBe(2);
    expect(publisher.count('warn')).toBe(0);
    expect(publisher.seen).toEqual(['dead d1', 'dead d2']);
  });
});
