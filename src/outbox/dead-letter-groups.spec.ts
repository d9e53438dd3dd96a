import { OutboxDeadLetterQueryError } from '../errors';
import { checkGroupId, failureGroupOf, normaliseMessage } from './dead-letter-groups';

describe('failure groups', () => {
  it('replaces numbers, UUIDs, long ids and quoted values', () => {
    expect(normaliseMessage('order 17 failed after 2.5 s')).toBe('order <n> failed after <n> s');
    expect(normaliseMessage('no row for 0193b3c2-7d1e-7a4b-9c3d-5e6f7a8b9c0d')).toBe('no row for <uuid>');
    expect(normaliseMessage(`key 'order-17' and "x y" and \`z\``)).toBe('key <str> and <str> and <str>');
    expect(normaliseMessage('token 01JD8X3K4M5N6P7Q8R9S0T1V2W, hash 9f86d081884c7d65')).toBe('token <id>, hash <id>');
    expect(normaliseMessage('  spaced \n  out  ')).toBe('spaced out');
    expect(normaliseMessage('x'.repeat(1000))).toHaveLength(301);
  });

  it('puts errors differing only in their varying parts in one group, and others apart', () => {
    const a = failureGroupOf('OutboxPublishTimeoutError: order 17 failed');
    expect(a).toMatchObject({ errorClass: 'OutboxPublishTimeoutError', message: 'order <n> failed', frame: null });
    expect(a.group).toMatch(/^[0-9a-f]{16}$/);
    expect(failureGroupOf('OutboxPublishTimeoutError: order 18 failed').group).toBe(a.group);
    expect(failureGroupOf('TypeError: order 18 failed').group).not.toBe(a.group);
    expect(failureGroupOf('OutboxPublishTimeoutError: invoice 18 failed').group).not.toBe(a.group);
  });

  it('takes the first frame outside node_modules and Node internals', () => {
    const stack = (line: number) =>
      'TypeError: boom\n' +
      `    at next (/app/node_modules/rxjs/Subscriber.js:${line}:1)\n` +
      '    at node:internal/process/task_queues:95:5\n' +
      '    at Handler.run (/app/src/handler.ts:10:3)\n' +
      '    at main (/app/src/main.ts:1:1)';
    expect(failureGroupOf(stack(1))).toMatchObject({
      message: 'boom',
      frame: 'Handler.run (/app/src/handler.ts:10:3)',
    });
    expect(failureGroupOf(stack(2)).group).toBe(failureGroupOf(stack(1)).group);
    expect(failureGroupOf('TypeError: boom').group).not.toBe(failureGroupOf(stack(1)).group);
  });

  it('groups a text without a class, and no text at all', () => {
    expect(failureGroupOf('connection reset')).toMatchObject({ errorClass: '', message: 'connection reset' });
    expect(failureGroupOf(null)).toMatchObject({ errorClass: '', message: '', frame: null });
  });

  it('refuses a malformed group id', () => {
    expect(checkGroupId('count', '0123456789abcdef')).toBe('0123456789abcdef');
    for (const bad of ['', 'xyz', '0123456789ABCDEF', 42, undefined]) {
      expect(() => checkGroupId('count', bad)).toThrow(OutboxDeadLetterQueryError);
    }
  });
});
