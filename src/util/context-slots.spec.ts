import { contextSlot, outsideEveryContextSlot } from './context-slots';

describe('context slots (one AsyncLocalStorage for the library)', () => {
  const a = contextSlot<string>('a');
  const b = contextSlot<number>('b');

  it('carries a value across awaits, and keeps the other slots as they are', async () => {
    expect(a.get()).toBeUndefined();
    await a.run('outer', async () => {
      await Promise.resolve();
      expect(a.get()).toBe('outer');
      await b.run(1, async () => {
        await new Promise((resolve) => setTimeout(resolve, 1));
        expect([a.get(), b.get()]).toEqual(['outer', 1]);
        await a.run('inner', async () => {
          await Promise.resolve();
          expect([a.get(), b.get()]).toEqual(['inner', 1]);
        });
        expect([a.get(), b.get()]).toEqual(['outer', 1]);
      });
      expect([a.get(), b.get()]).toEqual(['outer', undefined]);
    });
    expect(a.get()).toBeUndefined();
  });

  it('keeps concurrent chains apart', async () => {
    const seen: Array<[string | undefined, number | undefined]> = [];
    await Promise.all(
      ['x', 'y', 'z'].map((value, n) =>
        a.run(value, () =>
          b.run(n, async () => {
            await new Promise((resolve) => setTimeout(resolve, 3 - n));
            seen.push([a.get(), b.get()]);
          }),
        ),
      ),
    );
    expect(seen.sort()).toEqual([
      ['x', 0],
      ['y', 1],
      ['z', 2],
    ]);
  });

  it('outsideEveryContextSlot() runs work with every slot empty, and the caller keeps its own', async () => {
    await a.run('caller', () =>
      b.run(7, async () => {
        const inside = await outsideEveryContextSlot(async () => {
          await Promise.resolve();
          return [a.get(), b.get()];
        });
        expect(inside).toEqual([undefined, undefined]);
        expect([a.get(), b.get()]).toEqual(['caller', 7]);
      }),
    );
  });
});
