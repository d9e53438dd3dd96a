import { OutboxDeadLetterQueryError } from '../errors';
import { checkFilter, checkLimit, decodeCursor, encodeCursor } from './dead-letter-query';

describe('dead-letter queries', () => {
  it('round-trips a cursor, and refuses one it did not make', () => {
    const cursor = encodeCursor({ deadAt: 1_764_000_000_123, seq: '9007199254740993' });
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor('page', cursor)).toEqual({ deadAt: 1_764_000_000_123, seq: '9007199254740993' });
    expect(decodeCursor('page', null)).toBeUndefined();
    expect(decodeCursor('page', '')).toBeUndefined();
    const forged = Buffer.from('d1:1;DROP TABLE x:1').toString('base64url');
    for (const bad of ['nope', forged, 42, Buffer.from('d1:-5:1').toString('base64url')]) {
      expect(() => decodeCursor('page', bad)).toThrow(OutboxDeadLetterQueryError);
    }
  });

  it('normalizes times given as numbers, dates, ISO strings and digit strings', () => {
    expect(
      checkFilter('page', {
        deadSince: 1000,
        deadBefore: new Date(2000),
        createdSince: '1970-01-01T00:00:03Z',
        createdBefore: '4000',
      }),
    ).toEqual({ deadSince: 1000, deadBefore: 2000, createdSince: 3000, createdBefore: 4000 });
  });

  it.each([
    [
      'an unknown field (a typo must not widen a requeue to every dead message)',
      { patern: 'Order' },
      /unknown filter field patern/,
    ],
    ['an empty pattern', { pattern: '' }, /pattern must be a non-empty string/],
    ['a time that is no date', { deadSince: 'yesterday' }, /deadSince must be epoch milliseconds/],
    ['a negative time', { createdBefore: -1 }, /createdBefore must be epoch milliseconds/],
    ['ids that are not strings', { messageIds: [1] }, /array of message ids/],
    ['too many ids', { messageIds: new Array(1001).fill('x') }, /more than 1000/],
    ['a filter that is not an object', 'Order', /the filter must be an object/],
  ])('refuses %s', (_what, filter, message) => {
    expect(() => checkFilter('requeue', filter)).toThrow(OutboxDeadLetterQueryError);
    expect(() => checkFilter('requeue', filter)).toThrow(message);
  });

  it("takes a page size from 1 to 1000 (a query string's digits too)", () => {
    expect(checkLimit('page', undefined, 50)).toBe(50);
    expect(checkLimit('page', '20', 50)).toBe(20);
    for (const bad of [0, 1001, 2.5, '1e3', null]) expect(() => checkLimit('page', bad, 50)).toThrow(/limit must be/);
  });
});
