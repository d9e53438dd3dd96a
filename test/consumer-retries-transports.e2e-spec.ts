import { Controller, INestApplication, Type } from '@nestjs/common';
import { Ctx, EventPattern, MicroserviceOptions, Payload, Transport } from '@nestjs/microservices';
import { Column, DataSource, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { getOutboxMessageId, Idempotent, OutboxDeadLetters, OutboxEnvelopeDeserializer, OutboxService } from '../src';
import { OutboxMessage } from '../src/schema/outbox-message.entity';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { createTestDatabase, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith, SERVICES } from './helpers/services';

/*
 * @Idempotent({ retry }) on NATS, MQTT 5 and Redis consumers (no broker ack): a failed message is stored as an inbox
 * row and the handler returns normally; the relay retries it, then it is a dead letter; requeue() applies it once.
 * The messages are published by the outbox itself, so they carry its message id.
 */

@Entity('test_transport_entries')
class TransportEntry {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 100 })
  messageId!: string;
}

const state = { fixed: false, runs: new Map<string, number>() };
const RETRY = { maxAttempts: 3, initialDelay: 100, factor: 2, maxDelay: 2000, jitter: 0 };

/** A consumer of `pattern` whose `poison` messages fail until `state.fixed`. */
function ledgerConsumer(pattern: string): Type<unknown> {
  @Controller()
  class TransportLedger {
    constructor(private readonly outbox: OutboxService) {}

    @EventPattern(pattern)
    @Idempotent({ retry: RETRY })
    async onLedger(@Payload() data: { n: number; poison?: boolean }, @Ctx() context: unknown) {
      const id = getOutboxMessageId(data, context) ?? 'none';
      state.runs.set(id, (state.runs.get(id) ?? 0) + 1);
      await this.outbox.manager.insert(TransportEntry, { messageId: id });
      if (data.poison && !state.fixed) throw new Error(`rejects ${data.n}`);
    }
  }
  return TransportLedger;
}

const transports: Array<{
  name: string;
  services: Array<'nats' | 'mqtt' | 'redis'>;
  consumer: MicroserviceOptions;
  client: object;
}> = [
  {
    name: 'NATS',
    services: ['nats'],
    consumer: {
      transport: Transport.NATS,
      options: { servers: [`nats://${SERVICES.nats.host}:${SERVICES.nats.port}`] },
    },
    client: { transport: Transport.NATS, options: { servers: [`nats://${SERVICES.nats.host}:${SERVICES.nats.port}`] } },
  },
  {
    name: 'MQTT 5',
    services: ['mqtt'],
    consumer: {
      transport: Transport.MQTT,
      options: {
        url: `mqtt://${SERVICES.mqtt.host}:${SERVICES.mqtt.port}`,
        protocolVersion: 5,
        subscribeOptions: { qos: 1 },
      },
    },
    client: {
      transport: Transport.MQTT,
      options: { url: `mqtt://${SERVICES.mqtt.host}:${SERVICES.mqtt.port}`, protocolVersion: 5 },
    },
  },
  {
    name: 'Redis',
    services: ['redis'],
    consumer: {
      transport: Transport.REDIS,
      options: { ...SERVICES.redis, deserializer: new OutboxEnvelopeDeserializer() },
    },
    client: { transport: Transport.REDIS, options: { ...SERVICES.redis } },
  },
];

for (const transport of transports) {
  describeWith(
    ['postgres', ...transport.services],
    `@Idempotent({ retry }) ${transport.name} consumer on PostgreSQL`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let ds: DataSource;
      const pattern = `ledger-${transport.name.replace(/\W/g, '')}-${Date.now().toString(36)}`;

      beforeAll(async () => {
        state.fixed = false;
        db = await createTestDatabase('postgres');
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [ledgerConsumer(pattern)],
          imports: [(await import('@nestjs/typeorm')).TypeOrmModule.forFeature([TransportEntry])],
          client: transport.client as never,
          outbox: { publisher: { pollingInterval: 50 } },
        });
        app = moduleRef.createNestApplication({ logger: false });
        app.connectMicroservice(transport.consumer);
        await app.startAllMicroservices();
        await app.init();
        ds = app.get(DataSource);
      });

      afterAll(async () => {
        await app?.close();
        await db?.drop();
      });

      it('a poison message among 30: the others applied once; it runs maxAttempts times, goes dead, and requeue() after the fix applies it once', async () => {
        const outbox = app.get(OutboxService);
        const ids = await outbox.transaction(async () => {
          const out: string[] = [];
          for (let n = 0; n < 30; n++) out.push(await outbox.emit(pattern, { n, poison: n === 7 }));
          return out;
        });
        const poison = ids[7];
        const others = ids.filter((id) => id !== poison);
        const entries = ds.getRepository(TransportEntry);
        await waitFor(async () => (await entries.count()) >= others.length, 'the 29 others to be applied');
        const consumerRow = () =>
          ds
            .getRepository(OutboxMessage)
            .findOneBy({ messageId: poison, destination: 'consumer:TransportLedger.onLedger' });
        await waitFor(async () => (await consumerRow())?.status === 'dead', 'the poison message to go dead');
        for (const id of others) expect(state.runs.get(id)).toBe(1);
        expect(await entries.count()).toBe(others.length);
        expect(state.runs.get(poison)).toBe(RETRY.maxAttempts);
        const deadLetters = app.get(OutboxDeadLetters);
        const detail = (await deadLetters.get(poison, 'consumer:TransportLedger.onLedger'))!;
        expect(detail.history.map((h) => h.attempt)).toEqual([1, 2, 3]);
        expect(detail.lastError).toContain('rejects 7');

        state.fixed = true;
        expect(
          await deadLetters.requeue({ messageIds: [poison], destination: 'consumer:TransportLedger.onLedger' }),
        ).toBe(1);
        await waitFor(
          async () => (await entries.countBy({ messageId: poison })) === 1,
          'the poison message to be applied',
        );
        await waitFor(async () => (await consumerRow())?.status === 'sent', 'its row to be sent');
        expect(state.runs.get(poison)).toBe(RETRY.maxAttempts + 1);
        expect(await entries.countBy({ messageId: poison })).toBe(1);
      }, 60_000);
    },
  );
}
