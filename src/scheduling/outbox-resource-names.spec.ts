import { OUTBOX_ADVISORY_LOCK_CLASS, outboxLogContext, outboxResourceNames } from './outbox-resource-names';

describe('outboxResourceNames', () => {
  it('keeps the names the default outbox always had', () => {
    const expected = {
      publisherJob: 'nestjs-outbox:publisher',
      cleanupJob: 'nestjs-outbox:cleanup',
      notifyChannel: 'nestjs_outbox_outbox_messages',
      advisoryLockClass: OUTBOX_ADVISORY_LOCK_CLASS,
      replicationSlot: 'nestjs_outbox_outbox_messages',
    };
    expect(outboxResourceNames(undefined, 'outbox_messages')).toEqual(expected);
    expect(outboxResourceNames('default', 'outbox_messages')).toEqual(expected);
  });

  it('gives every named outbox names of its own, even over the same table', () => {
    const names = ['default', 'billing', 'reporting', 'billing2', 'Billing'].map((n) =>
      outboxResourceNames(n, 'outbox_messages'),
    );
    for (const key of [
      'publisherJob',
      'cleanupJob',
      'notifyChannel',
      'advisoryLockClass',
      'replicationSlot',
    ] as const) {
      expect(new Set(names.map((n) => n[key])).size).toBe(names.length);
    }
    expect(names[1]).toMatchObject({
      publisherJob: 'nestjs-outbox:publisher:billing',
      cleanupJob: 'nestjs-outbox:cleanup:billing',
      notifyChannel: 'nestjs_outbox_billing_outbox_messages',
      replicationSlot: 'nestjs_outbox_billing_outbox_messages',
    });
    expect(names[4].replicationSlot).toMatch(/^[a-z0-9_]{1,63}$/);
  });

  it('keeps channels within 63 characters and apart when long names share a prefix', () => {
    const long = 'a'.repeat(70);
    const one = outboxResourceNames(`${long}1`, 'outbox_messages').notifyChannel;
    const two = outboxResourceNames(`${long}2`, 'outbox_messages').notifyChannel;
    expect(one.length).toBeLessThanOrEqual(63);
    expect(two.length).toBeLessThanOrEqual(63);
    expect(one).not.toBe(two);
  });

  it('makes lock classes int4 values, as pg_advisory_xact_lock(int4, int4) takes them', () => {
    for (const name of ['billing', 'x', 'a-very-long-data-source-name']) {
      const { advisoryLockClass } = outboxResourceNames(name, 'outbox_messages');
      expect(Number.isInteger(advisoryLockClass)).toBe(true);
      expect(advisoryLockClass).toBeGreaterThanOrEqual(-(2 ** 31));
      expect(advisoryLockClass).toBeLessThan(2 ** 31);
    }
  });
});

describe('outboxLogContext', () => {
  it('names the DataSource of a named outbox in its log lines, and leaves the default as it was', () => {
    expect(outboxLogContext('OutboxPublisher', 'default')).toBe('OutboxPublisher');
    expect(outboxLogContext('OutboxPublisher', undefined)).toBe('OutboxPublisher');
    expect(outboxLogContext('OutboxPublisher', 'billing')).toBe('OutboxPublisher(billing)');
  });
});
