import { OutboxHandlerFailedError, OutboxHandlerInFlightError } from '../errors';
import { InFlightGiveBacks } from './in-flight-give-backs';

describe('InFlightGiveBacks', () => {
  let now = 0;
  const inFlight = () => new OutboxHandlerInFlightError('In-process handler H is running message m1 elsewhere.');

  beforeEach(() => {
    now = 1_000_000;
  });

  it('keeps an in-flight error (given back) until the grace has passed since the first find, then counts it', () => {
    const bound = new InFlightGiveBacks(60_000, () => now);
    const first = inFlight();
    expect(bound.judge('m1', first)).toBe(first);
    now += 59_999;
    expect(bound.judge('m1', inFlight())).toBeInstanceOf(OutboxHandlerInFlightError);
    now += 1;
    const counted = bound.judge('m1', inFlight());
    expect(counted).toBeInstanceOf(OutboxHandlerFailedError);
    expect((counted as Error).message).toMatch(
      /running message m1 elsewhere\. Still held 60 s after this publisher first found it \(2 × publisher\.leaseDuration\), so the attempt counts toward retry\.maxAttempts.*give what it awaits a timeout/,
    );
    expect((counted as OutboxHandlerFailedError).cause).toBeInstanceOf(OutboxHandlerInFlightError);
    // Another message found in flight meanwhile has its own grace.
    expect(bound.judge('m2', inFlight())).toBeInstanceOf(OutboxHandlerInFlightError);
  });

  it('starts over after any other failure of the message, or after it was not found in flight for the grace', () => {
    const bound = new InFlightGiveBacks(1_000, () => now);
    bound.judge('m1', inFlight());
    now += 900;
    const other = new Error('handler threw');
    expect(bound.judge('m1', other)).toBe(other);
    now += 900;
    expect(bound.judge('m1', inFlight())).toBeInstanceOf(OutboxHandlerInFlightError);
    expect(bound.size).toBe(1);
    // Not seen for longer than the grace (delivered by another publisher): forgotten by the next judgement.
    now += 1_001;
    expect(bound.judge('m2', new Error('x'))).toBeInstanceOf(Error);
    expect(bound.size).toBe(0);
    expect(bound.judge('m1', inFlight())).toBeInstanceOf(OutboxHandlerInFlightError);
  });
});
