import type { INestApplication } from '@nestjs/common';
import { ClientProxy, ReadPacket, WritePacket } from '@nestjs/microservices';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { DataSource } from 'typeorm';
import { OUTBOX_CHANNELS, OutboxMessage, OutboxNonRetryableError, OutboxPublisher, OutboxService } from '../src';
import { OutboxPublishedEvent } from '../src/events/publisher-events';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

/**
 * A broker client whose outcome is chosen by the pattern, to drive the real publisher through each event:
 * `Ok` is confirmed, `Flaky` fails (retryable), `Poison` fails for good, `Stolen` has its claim taken over by
 * "another publisher" (an UPDATE of claimed_by on the real row) while the publish is in flight.
 */
class ScriptedClient extends ClientProxy {
  dataSource?: DataSource;
  async connect(): Promise<void> {}
  async close(): Promise<void> {}
  unwrap<T>(): T {
    return undefined as T;
  }
  protected publish(_packet: ReadPacket, _callback: (packet: WritePacket) => void): () => void {
    return () => undefined;
  }
  protected async dispatchEvent<T = unknown>(packet: ReadPacket): Promise<T> {
    switch (packet.pattern) {
      case 'Flaky':
        throw new Error('broker said no');
      case 'Poison':
        throw new OutboxNonRetryableError('message too large');
      case 'Stolen':
        await this.dataSource!.getRepository(OutboxMessage).update(
          { pattern: 'Stolen' },
          { claimedBy: 'another-publisher' },
        );
        return undefined as T;
      default:
        return undefined as T;
    }
  }
}

const kinds: DatabaseKind[] = ['sqlite', 'postgres'];

for (const kind of kinds) {
  describeWith(servicesOf(kind), `publisher events on node:diagnostics_channel on ${DATABASE_LABEL[kind]}`, () => {
    let app: INestApplication;
    let outbox: OutboxService;
    const seen: Array<{ channel: string; event: any }> = [];
    const listeners = Object.values(OUTBOX_CHANNELS).map(
      (name) => [name, (event: unknown) => seen.push({ channel: name, event })] as const,
    );
    const fx = useOutboxApp(kind, {
      client: { customClass: ScriptedClient, options: {} } as any,
      outbox: { transport: 'tcp', publisher: { enabled: false }, retry: { maxAttempts: 3, initialDelay: 60_000 } },
      logger: false,
    });

    beforeAll(() => {
      ({ app, outbox } = fx);
      app.get<ScriptedClient>('BROKER').dataSource = fx.dataSource;
      for (const [name, listener] of listeners) subscribe(name, listener);
      fx.defer(() => listeners.forEach(([name, listener]) => unsubscribe(name, listener)));
    });

    beforeEach(async () => {
      await app.get(OutboxPublisher).flush();
      seen.length = 0;
    });

    const emitAndFlush = async (pattern: string) => {
      const id = await outbox.transaction(() => outbox.emit(pattern, { n: 1 }, { key: `k-${pattern}` }));
      await app.get(OutboxPublisher).flush();
      return id;
    };

    it('publishes nestjs-outbox:published with the confirmed messages (and to publisher.on listeners)', async () => {
      const viaPublisher: unknown[] = [];
      const listener = (event: unknown) => viaPublisher.push(event);
      app.get(OutboxPublisher).on('published', listener);
      const id = await emitAndFlush('Ok').finally(() => app.get(OutboxPublisher).off('published', listener));
      expect(viaPublisher).toEqual([seen[0]?.event]);
      expect(seen).toEqual([
        {
          channel: 'nestjs-outbox:published',
          event: {
            dataSource: 'default',
            owner: expect.any(String),
            messages: [
              {
                messageId: id,
                pattern: 'Ok',
                key: 'k-Ok',
                attempts: 1,
                destination: '', // the message's one destination, the outbox's broker
                publishDurationMs: expect.any(Number),
                delayMs: expect.any(Number),
              },
            ],
          },
        },
      ]);
      // The delay runs from the commit (before the claim) to the confirmation, so it spans the publish.
      const [{ publishDurationMs, delayMs }] = (seen[0].event as OutboxPublishedEvent).messages;
      expect(publishDurationMs).toBeGreaterThanOrEqual(0);
      expect(delayMs).toBeGreaterThanOrEqual(publishDurationMs!);
    });

    it('publishes nestjs-outbox:retry-scheduled for a retryable failure', async () => {
      const id = await emitAndFlush('Flaky');
      expect(seen).toEqual([
        {
          channel: 'nestjs-outbox:retry-scheduled',
          event: expect.objectContaining({
            dataSource: 'default',
            messageId: id,
            pattern: 'Flaky',
            attempts: 1,
            retryDelay: expect.any(Number),
            error: expect.stringContaining('broker said no'),
            errorType: 'Error',
            publishDurationMs: expect.any(Number),
          }),
        },
      ]);
    });

    it('publishes nestjs-outbox:dead-lettered for a permanent failure', async () => {
      const id = await emitAndFlush('Poison');
      expect(seen).toEqual([
        {
          channel: 'nestjs-outbox:dead-lettered',
          event: expect.objectContaining({
            messageId: id,
            pattern: 'Poison',
            attempts: 1,
            error: expect.stringContaining('message too large'),
          }),
        },
      ]);
    });

    it('publishes nestjs-outbox:lease-lost when the claim was taken over during the publish', async () => {
      const id = await emitAndFlush('Stolen');
      const lost = seen.filter((s) => s.channel === 'nestjs-outbox:lease-lost');
      expect(lost).toEqual([
        { channel: 'nestjs-outbox:lease-lost', event: expect.objectContaining({ lost: 1, messageIds: [id] }) },
      ]);
    });
  });
}
