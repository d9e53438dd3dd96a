import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { EventEmitter } from 'node:events';
import { OUTBOX_CHANNELS } from '../events/outbox-channels';
import { PublisherEventEmitter } from './publisher-event-emitter';

describe('PublisherEventEmitter', () => {
  const logger = { log: jest.fn(), error: jest.fn(), warn: jest.fn() };
  /** A payload that counts how often it is read (the stamping copy reads every field). */
  const counted = () => {
    const reads = { count: 0 };
    const payload = {
      get leaseId() {
        reads.count++;
        return 'lease-1';
      },
    };
    return { payload: payload as never, reads };
  };

  beforeEach(() => jest.clearAllMocks());

  it('stamps the outbox’s dataSource on what a listener receives', () => {
    const listeners = new EventEmitter();
    const received: unknown[] = [];
    listeners.on('leaseLost', (event) => received.push(event));
    new PublisherEventEmitter(listeners, logger, 'billing').send('leaseLost', counted().payload);
    expect(received).toEqual([{ leaseId: 'lease-1', dataSource: 'billing' }]);
  });

  it('stamps it on what a diagnostics-channel subscriber receives', () => {
    const received: unknown[] = [];
    const onMessage = (message: unknown) => received.push(message);
    subscribe(OUTBOX_CHANNELS.leaseLost, onMessage);
    try {
      new PublisherEventEmitter(new EventEmitter(), logger, 'default').send('leaseLost', counted().payload);
    } finally {
      unsubscribe(OUTBOX_CHANNELS.leaseLost, onMessage);
    }
    expect(received).toEqual([{ leaseId: 'lease-1', dataSource: 'default' }]);
  });

  it('does not even copy the payload when nothing watches the event', () => {
    const { payload, reads } = counted();
    const listeners = new EventEmitter();
    listeners.on('retry', () => undefined); // another event's listener does not count
    new PublisherEventEmitter(listeners, logger, 'default').send('leaseLost', payload);
    expect(reads.count).toBe(0);
  });

  it('logs a listener that throws instead of throwing into the relay', () => {
    const listeners = new EventEmitter();
    listeners.on('leaseLost', () => {
      throw new Error('listener bug');
    });
    const emitter = new PublisherEventEmitter(listeners, logger, 'default');
    expect(() => emitter.send('leaseLost', counted().payload)).not.toThrow();
    expect(logger.error).toHaveBeenCalledWith(expect.stringContaining('listener bug'));
  });
});
