import { Controller, INestApplication } from '@nestjs/common';
import { Ctx, EventPattern, KafkaContext, Payload, ServerKafka } from '@nestjs/microservices';
import { Column, DataSource, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { getOutboxMessageId, Idempotent, OutboxDeadLetters, OutboxRetryContext, OutboxService } from '../src';
import { OutboxMessage } from '../src/schema/outbox-message.entity';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/*
 * @Idempotent({ retry }) on a Kafka consumer, WITHOUT a Kafka broker (none runs here or in CI): Nest's own
 * ServerKafka, whose listen() does not connect, is handed records the way kafkajs' `eachMessage` hands them
 * (`handleMessage({ topic, partition, message })`), so the parser, the deserializer, the real KafkaContext and the
 * handler's interceptors are Nest's. Kafka has no per-message ack: with the default `autoCommit`, kafkajs commits
 * a record's offset once `eachMessage` resolves, and retries it (the consumer restarts at that offset) when it
 * rejects — so "settled" below means handleMessage resolved, "left to the broker" that it rejected.
 */

@Entity('test_kafka_entries')
class KafkaEntry {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 100 })
  messageId!: string;
}

const RETRY = { maxAttempts: 3, initialDelay: 100, factor: 2, maxDelay: 2000, jitter: 0 };
const TOPIC = 'kafka-ledger';
const PLAIN_TOPIC = 'kafka-plain';
const state = {
  fixed: false,
  /** The class of `@Ctx()` on each run, per message id (as `getOutboxMessageId()` reads it there). */
  runs: new Map<string, string[]>(),
};

async function handle(outbox: OutboxService, data: { n: number; poison?: boolean }, context: unknown) {
  const id = getOutboxMessageId(data, context) ?? 'none';
  state.runs.set(id, [...(state.runs.get(id) ?? []), (context as object).constructor.name]);
  await outbox.manager.insert(KafkaEntry, { messageId: id }); // rolled back with the failure below
  if (data.poison && !state.fixed) throw new Error(`ledger rejects message ${data.n}`);
}

@Controller()
class KafkaLedger {
  constructor(private readonly outbox: OutboxService) {}

  @EventPattern(TOPIC)
  @Idempotent({ retry: RETRY })
  onLedger(@Payload() data: { n: number; poison?: boolean }, @Ctx() context: KafkaContext | OutboxRetryContext) {
    return handle(this.outbox, data, context);
  }
}

/** The same consumer without `retry`: a failure is left to the broker, as before consumer retries. */
@Controller()
class PlainKafkaLedger {
  constructor(private readonly outbox: OutboxService) {}

  @EventPattern(PLAIN_TOPIC)
  @Idempotent()
  onPlain(@Payload() data: { n: number; poison?: boolean }, @Ctx() context: KafkaContext) {
    return handle(this.outbox, data, context);
  }
}

/** Nest's Kafka server with no kafkajs client: handlers are bound, nothing connects; records are fed by hand. */
class BrokerlessServerKafka extends ServerKafka {
  override async listen(callback: (error?: unknown) => void): Promise<void> {
    callback();
  }

  override async close(): Promise<void> {}

  private offset = 0;

  /** What kafkajs' `eachMessage` does with one record: resolves (offset committed) or rejects (record retried). */
  deliver(topic: string, value: unknown, headers: Record<string, string>): Promise<unknown> {
    const message = {
      key: null,
      value: Buffer.from(JSON.stringify(value)),
      headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, Buffer.from(v)])),
      offset: String(this.offset++),
      timestamp: String(Date.now()),
      attributes: 0,
      size: 0,
    };
    const payload = { topic, partition: 0, message, heartbeat: async () => undefined, pause: () => () => undefined };
    return this.handleMessage(payload as never);
  }
}

const kinds: DatabaseKind[] = ['sqlite', 'postgres'];

for (const kind of kinds) {
  describeWith(
    servicesOf(kind),
    `@Idempotent({ retry }) Kafka consumer (Nest's ServerKafka and KafkaContext, no broker) on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let ds: DataSource;
      let deadLetters: OutboxDeadLetters;
      const server = new BrokerlessServerKafka({ client: { brokers: ['kafka.invalid:9092'] } });
      const run = `${kind}-${Date.now().toString(36)}`;
      const id = (name: string) => `${run}-${name}`;
      const destination = 'consumer:KafkaLedger.onLedger';

      beforeAll(async () => {
        state.fixed = false;
        db = await createTestDatabase(kind);
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [KafkaLedger, PlainKafkaLedger],
          imports: [(await import('@nestjs/typeorm')).TypeOrmModule.forFeature([KafkaEntry])],
          outbox: { client: undefined, publisher: { pollingInterval: 50 } },
        });
        app = moduleRef.createNestApplication({ logger: false });
        app.connectMicroservice({ strategy: server });
        await app.startAllMicroservices();
        await app.init();
        ds = app.get(DataSource);
        deadLetters = app.get(OutboxDeadLetters);
      });

      afterAll(async () => {
        await app?.close();
        await db?.drop();
      });

      const applied = (messageId: string) => ds.getRepository(KafkaEntry).countBy({ messageId });
      const rowOf = (messageId: string) => ds.getRepository(OutboxMessage).findOneBy({ messageId });

      it('reads the message id from the x-message-id record header (or ce_id) through KafkaContext; a redelivered record is applied once', async () => {
        const ok = id('ok');
        await expect(server.deliver(TOPIC, { n: 1 }, { 'x-message-id': ok })).resolves.toBeUndefined();
        await expect(server.deliver(TOPIC, { n: 1 }, { 'x-message-id': ok })).resolves.toBeUndefined();
        expect(state.runs.get(ok)).toEqual(['KafkaContext']); // the second one skipped
        expect(await applied(ok)).toBe(1);
        expect(await rowOf(ok)).toBeNull(); // a success stores no inbox row
        // A CloudEvent in the Kafka binding's binary mode: its id is the `ce_id` header.
        const cloud = id('cloud');
        await server.deliver(TOPIC, { n: 2 }, { ce_id: cloud, ce_specversion: '1.0', ce_type: 'Ledger' });
        await server.deliver(TOPIC, { n: 2 }, { ce_id: cloud, ce_specversion: '1.0', ce_type: 'Ledger' });
        expect(state.runs.get(cloud)).toEqual(['KafkaContext']);
        expect(await applied(cloud)).toBe(1);
      });

      it('a failed record is stored as an inbox row and settled (eachMessage resolves, so kafkajs commits its offset); the relay retries it maxAttempts times, then it is one dead letter; requeue() after the fix applies it once', async () => {
        const poison = id('poison');
        const headers = { 'x-message-id': poison, 'x-tenant': 'acme' };
        await expect(server.deliver(TOPIC, { n: 3, poison: true }, headers)).resolves.toBeUndefined();
        const row = (await rowOf(poison))!;
        expect(row).toMatchObject({ destination, pattern: TOPIC });
        expect(JSON.parse(row.payload)).toEqual({ n: 3, poison: true });
        const stored = JSON.parse(row.headers!);
        expect(stored['x-tenant']).toBe('acme'); // the record's headers, as strings
        expect(stored['x-message-id']).toBeUndefined(); // the id is the row's own column
        expect(await applied(poison)).toBe(0);

        // Kafka redelivers a record whose offset was not committed (a crash before the commit): the row exists,
        // so the redelivery is settled without a second row.
        await expect(server.deliver(TOPIC, { n: 3, poison: true }, headers)).resolves.toBeUndefined();
        expect(await ds.getRepository(OutboxMessage).countBy({ messageId: poison })).toBe(1);

        await waitFor(async () => (await rowOf(poison))?.status === 'dead', 'the poison record to go dead', 30_000);
        const contexts = state.runs.get(poison);
        // The first delivery and its redelivery from Kafka, then the row's runs (attempts 2 and 3).
        expect(contexts).toEqual(['KafkaContext', 'KafkaContext', 'OutboxRetryContext', 'OutboxRetryContext']);
        const detail = (await deadLetters.get(poison, destination))!;
        expect(detail.attempts).toBe(RETRY.maxAttempts);
        expect(detail.history.map((h) => h.attempt)).toEqual([1, 2, 3]);
        for (const h of detail.history) expect(h.error).toContain('ledger rejects message 3');
        expect(await applied(poison)).toBe(0);

        state.fixed = true;
        expect(await deadLetters.requeue({ messageIds: [poison], destination })).toBe(1);
        await waitFor(async () => (await rowOf(poison))?.status === 'sent', 'the requeued row to be sent');
        expect(await applied(poison)).toBe(1);
        state.fixed = false;
        // Kafka delivering it once more: skipped, the record of the row's successful run decides.
        await server.deliver(TOPIC, { n: 3, poison: true }, headers);
        expect(await applied(poison)).toBe(1);
        expect(state.runs.get(poison)).toHaveLength(5);
      });

      it('without retry a failed record is left to Kafka: eachMessage rejects (no commit, kafkajs delivers it again) and nothing is stored', async () => {
        const plain = id('plain');
        await expect(server.deliver(PLAIN_TOPIC, { n: 4, poison: true }, { 'x-message-id': plain })).rejects.toEqual(
          expect.objectContaining({ status: 'error' }), // what Nest's RPC exception filter makes of the error
        );
        expect(state.runs.get(plain)).toEqual(['KafkaContext']);
        expect(await rowOf(plain)).toBeNull();
        expect(await applied(plain)).toBe(0);
      });
    },
  );
}
