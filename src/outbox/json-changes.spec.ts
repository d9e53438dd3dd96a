import { jsonChanges, sameJson } from './json-changes';

describe('jsonChanges', () => {
  it('lists each changed, added and removed value by JSON Pointer, objects by key and arrays by index', () => {
    const before = { amount: 10, customer: { email: 'a@x', 'a/b': 1 }, items: [1, 2], gone: true };
    const after = { amount: 12, customer: { email: 'a@x', 'a/b': 2 }, items: [1, 3, 4], added: 'y' };
    expect(jsonChanges(before, after, 100)).toEqual({
      changes: [
        { path: '/added', before: null, after: '"y"' },
        { path: '/amount', before: '10', after: '12' },
        { path: '/customer/a~1b', before: '1', after: '2' },
        { path: '/gone', before: 'true', after: null },
        { path: '/items/1', before: '2', after: '3' },
        { path: '/items/2', before: null, after: '4' },
      ],
      truncated: false,
    });
  });

  it('compares whole values when their kinds differ, and finds nothing in equal values (keys in any order)', () => {
    expect(jsonChanges([1], { a: 1 }, 100).changes).toEqual([{ path: '', before: '[1]', after: '{"a":1}' }]);
    expect(jsonChanges({ a: 1, b: [{ c: 2 }] }, { b: [{ c: 2 }], a: 1 }, 100).changes).toEqual([]);
    expect(sameJson({ a: 1 }, { a: 1, b: undefined })).toBe(false);
  });

  it('never shows a credential: *** under a secret-named key, URL user-info and secret fields redacted', () => {
    const { changes } = jsonChanges(
      { password: 'old-pw', db: { apiKey: 'k1' }, url: 'amqp://u:s3cret@h', nested: { x: 1 } },
      { password: 'new-pw', db: { apiKey: 'k2' }, url: 'amqp://u:other@h', nested: { x: 1, token: 'abc' } },
      100,
    );
    const text = JSON.stringify(changes);
    for (const secret of ['old-pw', 'new-pw', 'k1', 'k2', 's3cret', 'other', 'abc']) expect(text).not.toContain(secret);
    expect(changes.map((c) => c.path)).toEqual(['/db/apiKey', '/nested/token', '/password', '/url']);
    expect(changes[2]).toEqual({ path: '/password', before: '"***"', after: '"***"' });
  });

  it('stops at the limit and says so', () => {
    const before = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`k${i}`, i]));
    const result = jsonChanges(before, {}, 3);
    expect(result.changes).toHaveLength(3);
    expect(result.truncated).toBe(true);
  });
});
