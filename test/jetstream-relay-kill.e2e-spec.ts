import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OutboxJetStreamClient, OutboxMessage, OutboxService } from '../src';
import type { JetStreamRelayConfig } from './faults/apps/jetstream-relay.main';
import { ChildApp } from './faults/support/child-app';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { createTestDatabase, TestDatabase } from './helpers/databases';
import { NATS_URL, TestStream } from './helpers/jetstream';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

jest.setTimeout(180_000);

const MESSAGES = 10_000;
/** PubAcks each killed incarnation receives before it stalls (and is SIGKILLed) between PubAck and marking sent. */
const STALL_AFTER = [600, 1_500];
/** A short lease, so the rows a killed relay held are taken over within seconds. */
const PUBLISHER = { pollingInterval: 100, batchSize: 200, leaseDuration: 3_000, publishTimeout: 1_000 };
const RETRY = { initialDelay: 50, maxDelay: 1_000, maxAttempts: 1_000 };

describeWith(['postgres', 'nats'], 'JetStream relay SIGKILLed between PubAck and marking sent, on PostgreSQL', () => {
  let db: TestDatabase;
  let stream: TestStream;
  let app: INestApplication;
  const relays: ChildApp[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    stream = await new TestStream().create();
    // The producer: writes the outbox rows (and creates the tables); its own publisher is off, the child relays.
    const moduleRef = await createOutboxTestingModule({
      db,
      client: { customClass: OutboxJetStreamClient, options: { servers: [NATS_URL], stream: stream.name } } as any,
      outbox: { publisher: { enabled: false } },
    });
    app = moduleRef.createNestApplication();
    app.useLogger(false);
    await app.init();
  });

  afterAll(async () => {
    for (const relay of relays) await relay.stop();
    await app?.close();
    await stream?.delete();
    await db?.drop();
  });

  const relay = (stallAfterAcks?: number) => {
    const config: JetStreamRelayConfig = {
      db: db.options,
      servers: [NATS_URL],
      stream: stream.name,
      publisher: PUBLISHER,
      retry: RETRY,
      ...(stallAfterAcks === undefined ? {} : { stallAfterAcks }),
    };
    const child = new ChildApp('jetstream-relay.main.ts', config, `jetstream-relay-${relays.length + 1}`);
    relays.push(child);
    return child;
  };
  const rows = () => app.get(DataSource).getRepository(OutboxMessage);

  it(`${MESSAGES} messages: every kill leaves stored-but-unsent messages, republished as duplicates; each stored once, none lost`, async () => {
    const outbox = app.get(OutboxService);
    const ids: string[] = [];
    for (let start = 0; start < MESSAGES; start += 1_000) {
      const events = Array.from({ length: 1_000 }, (_, i) => ({
        pattern: stream.subject('placed'),
        payload: { n: start + i },
      }));
      ids.push(...(await outbox.transaction(() => outbox.emitMany(events))));
    }

    // Each incarnation relays until it stalls after a PubAck; SIGKILL there. What the stream stored beyond the
    // rows marked sent is exactly what a crash between PubAck and marking sent leaves behind.
    const leftBehind: number[] = [];
    for (const threshold of STALL_AFTER) {
      const child = relay(threshold);
      await child.start();
      await child.waitForSignal((s) => s.type === 'stalled', 90_000);
      await child.kill();
      const stored = await stream.count();
      const sent = await rows().countBy({ status: 'sent' });
      leftBehind.push(stored - sent);
    }
    for (const count of leftBehind) expect(count).toBeGreaterThan(0);

    // The last incarnation runs to the end: it takes the killed relays' rows over once their leases ended.
    const last = relay();
    await last.start();
    await waitFor(
      async () => (await rows().countBy({ status: 'sent' })) === MESSAGES,
      'every row marked sent',
      120_000,
      async () => `${await rows().countBy({ status: 'sent' })} sent\n${last.tail()}`,
    );

    // Each message stored once, none lost: exactly the outbox's ids, one stream entry each.
    const storedIds = await stream.ids();
    expect(storedIds.length).toBe(MESSAGES);
    expect(new Set(storedIds)).toEqual(new Set(ids));
    expect(await rows().countBy({ status: 'dead' })).toBe(0);

    // The messages a kill left behind were published again and JetStream answered `duplicate`: at least the largest
    // set left by one kill (a message can be left behind by several kills), each an entry the stream already had.
    const duplicates = relays.flatMap((r) => r.signals.filter((s) => s.type === 'duplicate').map((s) => s.seq));
    const distinct = new Set(duplicates);
    expect(distinct.size).toBeGreaterThanOrEqual(Math.max(...leftBehind));
    for (const seq of distinct) expect(seq as number).toBeLessThanOrEqual(MESSAGES);
    expect(relays.reduce((kills, r) => kills + r.kills, 0)).toBe(STALL_AFTER.length);
  });
});
