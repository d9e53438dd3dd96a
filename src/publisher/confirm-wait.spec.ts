import type { ClientProxy } from '@nestjs/microservices';
import { OutboxPublishTimeoutError } from '../errors';
import { dispatchConfirmed } from './confirm-wait';

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

describe('dispatchConfirmed', () => {
  it('waits past publishTimeout for a late confirm on a connected client, and says it is late once', async () => {
    const late = jest.fn();
    await dispatchConfirmed(
      clientConfirmingAfter(130),
      'p',
      {},
      {
        publishTimeout: 30,
        maxConfirmWait: 5_000,
        connected: () => true,
        late,
      },
    );
    expect(late).toHaveBeenCalledTimes(1);
  });

  it('resolves without a word when the confirm is prompt', async () => {
    const late = jest.fn();
    await dispatchConfirmed(
      clientConfirmingAfter(1),
      'p',
      {},
      {
        publishTimeout: 200,
        maxConfirmWait: 5_000,
        connected: () => true,
        late,
      },
    );
    expect(late).not.toHaveBeenCalled();
  });

  it('keeps waiting on a client that reports no status', async () => {
    await expect(
      dispatchConfirmed(
        clientConfirmingAfter(80),
        'p',
        {},
        {
          publishTimeout: 20,
          maxConfirmWait: 5_000,
          connected: () => undefined,
          late: () => undefined,
        },
      ),
    ).resolves.toBeUndefined();
  });

  it('gives up with OutboxPublishTimeoutError once the client reports itself disconnected', async () => {
    let connected = true;
    setTimeout(() => (connected = false), 50);
    const late = jest.fn();
    const waiting = dispatchConfirmed(
      clientConfirmingAfter(undefined),
      'p',
      {},
      {
        publishTimeout: 30,
        maxConfirmWait: 5_000,
        connected: () => connected,
        late,
      },
    );
    await expect(waiting).rejects.toThrow(/client is disconnected/);
    await expect(waiting).rejects.toBeInstanceOf(OutboxPublishTimeoutError);
    expect(late).toHaveBeenCalledTimes(1);
  });

  it('gives up after maxConfirmWait on a connected client that never confirms', async () => {
    await expect(
      dispatchConfirmed(
        clientConfirmingAfter(undefined),
        'p',
        {},
        {
          publishTimeout: 20,
          maxConfirmWait: 70,
          connected: () => true,
          late: () => undefined,
        },
      ),
    ).rejects.toThrow(/publisher\.maxConfirmWait \(70 ms\)/);
  });

  it('passes the transport error through', async () => {
    const client = {
      connect: async () => undefined,
      dispatchEvent: async () => {
        throw new Error('nacked');
      },
    } as unknown as ClientProxy;
    await expect(
      dispatchConfirmed(
        client,
        'p',
        {},
        {
          publishTimeout: 20,
          maxConfirmWait: 70,
          connected: () => true,
          late: () => undefined,
        },
      ),
    ).rejects.toThrow('nacked');
  });
});
