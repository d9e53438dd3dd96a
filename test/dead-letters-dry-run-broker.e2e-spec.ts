import type { Channel, ChannelModel, GetMessage } from 'amqplib';
import { DataSource } from 'typeorm';
import { OutboxDeadLetters, OutboxMessage, OutboxPublisher, OutboxService } from '../src';
import { deleteQueue, RABBITMQ_URL, rmqClientOptions, uniqueQueue } from './helpers/consumers';
import { useOutboxApp } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

const PAYLOAD = { order: 'o-17', lines: [{ sku: 'A-1', qty: 2 }], note: 'ünïcödé' };
const HEADERS = { tenant: 't-1', 'x-request-id': 'r-9' };

/**
 * A dry run of dead rows bound for RabbitMQ builds the record through the relay's transport and the client's
 * serializer and reports it — and sends nothing: the queue stays empty. The packet it reports matches what the
 * relay really sends for the same message (same header names, same body size).
 */
describeWith(['postgres', 'rabbitmq'], 'Dead-letter dry run of a broker destination (RabbitMQ)', () => {
  const queue = uniqueQueue('dry-run');
  const fx = useOutboxApp('postgres', (f) => {
    f.defer(() => deleteQueue(queue));
    return { logger: false, client: rmqClientOptions(queue), outbox: { publisher: { pollingInterval: 50 } } };
  });
  let connection: ChannelModel;
  let channel: Channel;

  beforeAll(async () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const amqp = require('amqplib') as typeof import('amqplib');
    connection = await amqp.connect(RABBITMQ_URL);
    channel = await connection.createChannel();
    await channel.assertQueue(queue, { durable: true });
  });
  afterAll(() => connection?.close());

  it('reports destination, pattern, header names and size of what would be sent, without publishing', async () => {
    // What the relay really sends for this message, to compare the dry run's report with.
    const outbox = fx.app.get(OutboxService);
    await outbox.transaction(() => outbox.emit('Shipped', PAYLOAD, { headers: HEADERS }));
    await fx.app.get(OutboxPublisher).flush();
    let sent: GetMessage | false = false;
    await waitFor(async () => (sent = await channel.get(queue, { noAck: true })) !== false, 'the real message');
    const real = sent as unknown as GetMessage;

    const dead = (messageId: string, destination: string) => ({
      messageId,
      pattern: 'Shipped',
      destination,
      payload: JSON.stringify(PAYLOAD),
      headers: JSON.stringify(HEADERS),
      status: 'dead',
      attempts: 5,
      availableAt: new Date(1_000_000),
      createdAt: new Date(1_000_000),
      deadAt: new Date(2_000_000),
      lastError: 'OutboxPublishTimeoutError: no confirm within 5000ms',
    });
    const repository = fx.app.get(DataSource).getRepository(OutboxMessage);
    await repository.insert([
      dead('dry-broker', 'broker:BROKER'),
      dead('dry-all', ''),
      dead('dry-gone', 'broker:REMOVED'),
    ] as never);
    // The dead rows (the real message's own row is the relay's to finish: it may still be marked sent meanwhile).
    const deadRows = () => repository.find({ where: { status: 'dead' }, order: { seq: 'ASC' } });
    const before = await deadRows();
    expect(before.map((r) => r.messageId)).toEqual(['dry-broker', 'dry-all', 'dry-gone']);

    const trial = await fx.app.get(OutboxDeadLetters).dryRun({ pattern: 'Shipped' });

    expect([trial.tried, trial.ok, trial.failed]).toEqual([3, 2, 1]);
    const byId = Object.fromEntries(trial.results.map((r) => [r.messageId, r]));
    const packet = {
      transport: 'rmq',
      pattern: 'Shipped',
      headers: Object.keys(real.properties.headers ?? {}),
      bytes: real.content.length,
      connected: true,
    };
    expect(packet.headers.sort()).toEqual(['tenant', 'x-message-id', 'x-request-id']);
    for (const id of ['dry-broker', 'dry-all']) {
      expect(byId[id].ok).toBe(true);
      expect(byId[id].targets).toHaveLength(1);
      const [target] = byId[id].targets;
      expect({ ...target, packet: { ...target.packet, headers: [...target.packet!.headers].sort() } }).toEqual({
        kind: 'broker',
        destination: 'broker:BROKER',
        ok: true,
        packet,
      });
    }
    expect(byId['dry-gone']).toMatchObject({
      ok: false,
      targets: [],
      error: { errorClass: 'OutboxNoDestinationError' },
    });
    expect(byId['dry-gone'].error!.message).toContain('no broker client named REMOVED');

    // Nothing was published (the client is connected: a send would have been confirmed before dryRun resolved),
    // and nothing was written.
    expect((await channel.checkQueue(queue)).messageCount).toBe(0);
    expect(await channel.get(queue)).toBe(false);
    expect(await deadRows()).toEqual(before);
    expect(await repository.count()).toBe(4);
  });
});
