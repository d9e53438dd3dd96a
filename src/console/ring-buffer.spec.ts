import { RingBuffer } from './ring-buffer';

describe('RingBuffer', () => {
  it('keeps the newest items, oldest first', () => {
    const ring = new RingBuffer<number>(3);
    expect(ring.toArray()).toEqual([]);
    [1, 2].forEach((n) => ring.push(n));
    expect(ring.toArray()).toEqual([1, 2]);
    [3, 4, 5].forEach((n) => ring.push(n));
    expect(ring.toArray()).toEqual([3, 4, 5]);
    ring.push(6);
    expect(ring.toArray()).toEqual([4, 5, 6]);
    expect(ring.size).toBe(3);
  });

  it('refuses a capacity below 1', () => {
    expect(() => new RingBuffer(0)).toThrow(RangeError);
  });
});
