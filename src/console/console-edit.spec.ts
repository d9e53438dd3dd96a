import { keepHidden } from './console-edit';

describe('keepHidden (the console keeps the stored value of what it showed redacted)', () => {
  it('puts back a stored secret left as *** and a URL whose user-info was left redacted', () => {
    const stored = { amount: 10, card: { password: 'pw-1', token: 42 }, url: 'amqp://u:s@h/v', items: ['a', 'b'] };
    const edited = { amount: 12, card: { password: '***', token: '***' }, url: 'amqp://***@h/v', items: ['a', '***'] };
    expect(keepHidden(edited, stored)).toEqual({
      amount: 12,
      card: { password: 'pw-1', token: 42 },
      url: 'amqp://u:s@h/v',
      items: ['a', 'b'],
    });
  });

  it('keeps what the operator typed: a new secret, a new URL, *** where nothing is stored', () => {
    const stored = { card: { password: 'pw-1' }, url: 'amqp://u:s@h/v' };
    const edited = { card: { password: 'pw-2' }, url: 'amqp://***@other/v', extra: '***' };
    expect(keepHidden(edited, stored)).toEqual(edited);
  });
});
