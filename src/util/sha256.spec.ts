import { createHash } from 'node:crypto';
import { sha256Hex } from './sha256';

describe('sha256Hex', () => {
  it('is the SHA-256 of the UTF-8 text, as createHash gives it', () => {
    for (const text of ['', 'abc', 'clé\u0000ключ😀', 'x'.repeat(10_000)]) {
      expect(sha256Hex(text)).toBe(createHash('sha256').update(text).digest('hex'));
    }
  });
});
