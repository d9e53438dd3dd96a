import { CanActivate, Controller, ExecutionContext, INestApplication, Injectable, UseGuards } from '@nestjs/common';
import {
  ClientProxy,
  EventPattern,
  MicroserviceOptions,
  Payload,
  ReadPacket,
  Transport,
  WritePacket,
} from '@nestjs/microservices';
import { TestingModuleBuilder } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import { getOutboxMessageId, Idempotent, OutboxEnvelopeDeserializer, OutboxService } from '../src';
import { deliverEveryMessageTwice, flushOutbox } from '../src/testing';
import { TestOrder } from './fixtures/order.entity';
import { DATABASE_LABEL } from './helpers/databases';
import { E2eFixture, useTestDatabase } from './helpers/e2e-fixture';
import { freePort, waitFor } from './helpers/ports';

/** Every delivery that reaches a consumer (guards run before interceptors, so duplicates are counted too). */
const arrivals: Array<{ pattern: string; messageId?: string }> = [];
@Injectable()
class CountArrivals implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    arrivals.push({
      pattern: String(context.switchToRpc().getContext().getPattern?.() ?? '?'),
      messageId: getOutboxMessageId(context),
    });
    return true;
  }
}

/** The app's consumers: one idempotent (@Idempotent(), effect in the same transaction), one naive. */
@Controller()
@UseGuards(CountArrivals)
class Consumers {
  static naiveEffects = 0;
  constructor(private readonly outbox: OutboxService) {}

  @EventPattern('Deposit')
  @Idempotent()
  async onDeposit(@Payload() deposit: { amount: number }) {
    await this.outbox.manager.save(TestOrder, { reference: 'deposit', amount: deposit.amount });
  }

  @EventPattern('Ping')
  onPing() {
    Consumers.naiveEffects++;
  }
}

/** A broker that takes 300 ms to confirm each message. */
class SlowBroker extends ClientProxy {
  readonly sent: string[] = [];
  async connect(): Promise<void> {}
  async close(): Promise<void> {}
  unwrap<T>(): T {
    return undefined as T;
  }
  protected publish(_packet: ReadPacket, _callback: (packet: WritePacket) => void): () => void {
    return () => undefined;
  }
  protected async dispatchEvent<T = unknown>(packet: ReadPacket): Promise<T> {
    await new Promise((r) => setTimeout(r, 300));
    this.sent.push(packet.pattern);
    return undefined as T;
  }
}

/** An app that consumes its own messages over TCP (a microservice connected to the same app). */
async function startApp(fx: E2eFixture, adjust?: (builder: TestingModuleBuilder) => TestingModuleBuilder) {
  const port = await freePort();
  return fx.start({
    client: { transport: Transport.TCP, options: { host: '127.0.0.1', port } } as never,
    outbox: { publisher: { enabled: false } },
    controllers: [Consumers],
    providers: [CountArrivals],
    adjust,
    logger: false,
    beforeInit: async (app) => {
      app.connectMicroservice<MicroserviceOptions>({
        transport: Transport.TCP,
        options: { host: '127.0.0.1', port, deserializer: new OutboxEnvelopeDeserializer() },
      });
      await app.startAllMicroservices();
    },
  });
}

describe(`nestjs-outbox/testing (TCP, ${DATABASE_LABEL.sqlite})`, () => {
  const fx = useTestDatabase('sqlite', { per: 'test' });
  let app: INestApplication | undefined;

  beforeEach(() => {
    app = undefined;
    arrivals.length = 0;
    Consumers.naiveEffects = 0;
  });

  it('flushOutbox() publishes what the test wrote, now, and resolves with the count', async () => {
    app = await startApp(fx);
    const outbox = app.get(OutboxService);
    const id = await outbox.transaction(() => outbox.emit('Deposit', { amount: 5 }));
    expect(await flushOutbox(app)).toBe(1);
    await waitFor(
      async () => (await app!.get(DataSource).getRepository(TestOrder).count()) === 1,
      'the deposit to be applied',
    );
    expect(arrivals).toEqual([{ pattern: 'Deposit', messageId: id }]);
    expect(await flushOutbox(app)).toBe(0);
  });

  it('flushOutbox() with the publisher enabled also waits for a batch its own loop has in flight', async () => {
    app = await fx.start({
      client: { customClass: SlowBroker, options: {} } as any,
      outbox: { transport: 'tcp', publisher: { enabled: true, pollingInterval: 60_000 } },
      logger: false,
    });
    const outbox = app.get(OutboxService);
    await outbox.transaction(() => outbox.emit('Slow', {})); // the commit wakes the publisher's own loop
    await waitFor(async () => (await outbox.stats()).inFlight === 1, "the publisher's loop to claim the row");
    await flushOutbox(app);
    expect(await outbox.stats()).toMatchObject({ pending: 0, inFlight: 0, due: 0 });
    expect(app.get<SlowBroker>('BROKER').sent).toEqual(['Slow']);
  });

  it('deliverEveryMessageTwice(): every message arrives twice with one id; the idempotent consumer applies it once, the naive one twice', async () => {
    app = await startApp(fx, deliverEveryMessageTwice);
    const outbox = app.get(OutboxService);
    const [deposit, ping] = await outbox.transaction(async () => [
      await outbox.emit('Deposit', { amount: 7 }),
      await outbox.emit('Ping', {}),
    ]);
    expect(await flushOutbox(app)).toBe(2);

    await waitFor(() => arrivals.length === 4, 'both messages to arrive twice');
    expect(arrivals.filter((a) => a.pattern === 'Deposit')).toEqual([
      { pattern: 'Deposit', messageId: deposit },
      { pattern: 'Deposit', messageId: deposit },
    ]);
    expect(arrivals.filter((a) => a.pattern === 'Ping').map((a) => a.messageId)).toEqual([ping, ping]);

    await waitFor(() => Consumers.naiveEffects === 2, 'the naive consumer to apply both deliveries');
    // Both Deposit deliveries have arrived; give the second one's (skipped) handling time to finish before counting.
    await new Promise((r) => setTimeout(r, 200));
    expect(await app.get(DataSource).getRepository(TestOrder).findBy({ reference: 'deposit' })).toEqual([
      expect.objectContaining({ amount: 7 }),
    ]);
  });
});
