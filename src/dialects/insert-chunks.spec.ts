import { insertChunks } from './insert-chunks';
import type { NewOutboxRow } from './outbox-dialect';

const row = (i: number, extra: Partial<NewOutboxRow> = {}): NewOutboxRow => ({
  messageId: `m-${i}`,
  pattern: 'P',
  payload: '{}',
  headers: null,
  key: null,
  ...extra,
});

describe('insertChunks()', () => {
  it('keeps every statement under the parameter limit, rows in order', () => {
    const rows = Array.from({ length: 10_000 }, (_, i) => row(i, i % 3 === 0 ? { delay: 5 } : {}));
    const chunks = insertChunks(rows, { maxParameters: 32_766, maxBytes: Infinity });
    for (const chunk of chunks) {
      const parameters = chunk.reduce((n, r) => n + (r.delay ? 6 : 5), 0);
      expect(parameters).toBeLessThanOrEqual(32_766);
    }
    expect(chunks.length).toBe(2);
    expect(chunks.flat().map((r) => r.messageId)).toEqual(rows.map((r) => r.messageId));
  });

  it('fills a chunk up to the limit exactly', () => {
    const chunks = insertChunks(
      Array.from({ length: 10 }, (_, i) => row(i)),
      { maxParameters: 25, maxBytes: Infinity },
    );
    expect(chunks.map((c) => c.length)).toEqual([5, 5]);
  });

  it("counts a cause's two parameters (scope and key)", () => {
    const cause = { scope: 'user-1', key: 'k' };
    const chunks = insertChunks(
      Array.from({ length: 10 }, (_, i) => row(i, { cause })),
      { maxParameters: 21, maxBytes: Infinity },
    );
    expect(chunks.map((c) => c.length)).toEqual([3, 3, 3, 1]);
  });

  it('bounds the text one statement carries, and sends a larger row alone', () => {
    const big = 'x'.repeat(100);
    const rows = [row(0, { payload: big }), row(1, { payload: big }), row(2, { payload: big.repeat(3) }), row(3)];
    const chunks = insertChunks(rows, { maxParameters: 65_535, maxBytes: 250 });
    expect(chunks.map((c) => c.map((r) => r.messageId))).toEqual([['m-0', 'm-1'], ['m-2'], ['m-3']]);
  });

  it('returns no chunk for no rows', () => {
    expect(insertChunks([], { maxParameters: 10, maxBytes: 10 })).toEqual([]);
  });
});
