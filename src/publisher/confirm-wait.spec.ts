import type { ClientProxy } from '@nestjs/microservices';
import { OutboxPublishTimeoutError } from '../errors';
import { ConfirmWait, dispatchConfirmed } from './confirm-wait';

/** A client whose confirm comes after `confirmAfter` ms (never when undefined). */
function clientConfirmingAfter(confirmAfter: number | undefined): ClientProxy {
  return {
    connect: async () => undefined,
    dispatchEvent: () =>
      new Promise<void>((resolve) => {
        if (confirmAfter !== undefined) setTimeout(resolve, confirmAfter);
      }),
  } as unknown as ClientProxy;
}

/** A wait on a connected client that is not stopping, with `overrides`. */
function waitWith(overrides: Partial<ConfirmWait>): ConfirmWait {
  return {
    publishTimeout: 30,
    maxConfirmWait: 5_000,
    connected: () => true,
    late: () => undefined,
    stopping: () => false,
    ...overrides,
  };
}

describe('dispatchConfirmed', () => {
  it('waits past publishTimeout for a late confirm on a connected client, and says it is late once', async () => {
    const late = jest.fn();
    await dispatchConfirmed(clientConfirmingAfter(130), 'p', {}, waitWith({ late }));
    expect(late).toHaveBeenCalledTimes(1);
  });

  it('resolves without a word when the confirm is prompt', async () => {
    const late = jest.fn();
    await dispatchConfirmed(clientConfirmingAfter(1), 'p', {}, waitWith({ publishTimeout: 200, late }));
    expect(late).not.toHaveBeenCalled();
  });

  it('keeps waiting on a client that reports no status', async () => {
    const wait = waitWith({ publishTimeout: 20, connected: () => undefined });
    await expect(dispatchConfirmed(clientConfirmingAfter(80), 'p', {}, wait)).resolves.toBeUndefined();
  });

  it('gives up with OutboxPublishTimeoutError once the client reports itself disconnected', async () => {
    let connected = true;
    setTimeout(() => (connected = false), 50);
    const late = jest.fn();
    const waiting = dispatchConfirmed(
      clientConfirmingAfter(undefined),
      'p',
      {},
      waitWith({ connected: () => connected, late }),
    );
    await expect(waiting).rejects.toThrow(/client is disconnected/);
    await expect(waiting).rejects.toBeInstanceOf(OutboxPublishTimeoutError);
    expect(late).toHaveBeenCalledTimes(1);
  });

  it('gives up after maxConfirmWait on a connected client that never confirms', async () => {
    const wait = waitWith({ publishTimeout: 20, maxConfirmWait: 70 });
    await expect(dispatchConfirmed(clientConfirmingAfter(undefined), 'p', {}, wait)).rejects.toThrow(
      /publisher\.maxConfirmWait \(70 ms\)/,
    );
  });

  it('stops waiting for a late confirm once the publisher is stopping', async () => {
    let stopping = false;
    setTimeout(() => (stopping = true), 50);
    const wait = waitWith({ stopping: () => stopping });
    await expect(dispatchConfirmed(clientConfirmingAfter(undefined), 'p', {}, wait)).rejects.toThrow(
      /publisher is stopping/,
    );
  });

  it('passes the transport error through', async () => {
    const client = {
      connect: async () => undefined,
      dispatchEvent: async () => {
        throw new Error('nacked');
      },
    } as unknown as ClientProxy;
    await expect(dispatchConfirmed(client, 'p', {}, waitWith({}))).rejects.toThrow('nacked');
  });
});
