import { Transport } from '@nestjs/microservices';
import { OutboxEnvelopeDeserializer, OutboxMessage } from '../src';
import { TestOrder } from './fixtures/order.entity';
import { deleteQueue, rmqClientOptions, rmqConsumerOptions, startConsumer, uniqueQueue } from './helpers/consumers';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { freePort, waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `Publisher → RabbitMQ (RMQ transport) on ${DATABASE_LABEL[kind]}`,
    () => {
      let consumer: Awaited<ReturnType<typeof startConsumer>>;
      const queue = uniqueQueue('outbox-pub');
      const fx = useOutboxApp(kind, async ({ defer }) => {
        defer(() => deleteQueue(queue));
        consumer = await startConsumer(['OrderPlaced'], rmqConsumerOptions(queue));
        defer(() => consumer.close());
        return { client: rmqClientOptions(queue) };
      });

      it('delivers pattern, payload and message id (AMQP messageId + x-message-id header, persistent) to a Nest consumer', async () => {
        const { outbox } = fx;
        const id = await outbox.transaction(async (manager) => {
          const order = await manager.save(TestOrder, { reference: 'R-1', amount: 42 });
          return outbox.emit('OrderPlaced', { orderId: order.id, amount: 42 }, { headers: { tenant: 'acme' } });
        });
        await waitFor(() => consumer.received.length >= 1, 'the RMQ consumer to receive OrderPlaced');
        const [message] = consumer.received;
        expect(message.pattern).toBe('OrderPlaced');
        expect(message.data).toEqual({ orderId: expect.any(Number), amount: 42 });
        expect(message.messageId).toBe(id);
        const properties = message.context.getMessage().properties;
        expect(properties.messageId).toBe(id);
        expect(properties.headers['x-message-id']).toBe(id);
        expect(properties.headers.tenant).toBe('acme');
        expect(properties.deliveryMode).toBe(2);
        const ds = fx.dataSource;
        await waitFor(
          async () => (await ds.getRepository(OutboxMessage).findOneByOrFail({ messageId: id })).status === 'sent',
          'the row to be marked sent',
        );
        const row = await ds.getRepository(OutboxMessage).findOneByOrFail({ messageId: id });
        expect(row.sentAt).toBeInstanceOf(Date);
        expect(row.attempts).toBe(1);
        expect(row.claimedBy).toBeNull();
      });

      it('flush() publishes every due row and resolves with the count', async () => {
        const { outbox } = fx;
        const before = consumer.received.length;
        const ids = await outbox.transaction(async () =>
          Promise.all([1, 2, 3].map((n) => outbox.emit('OrderPlaced', { n }))),
        );
        await outbox.flush();
        await waitFor(() => consumer.received.length >= before + 3, 'three more messages');
        expect(
          consumer.received
            .slice(before)
            .map((m) => m.messageId)
            .sort(),
        ).toEqual([...ids].sort());
      });
    },
  );
}

describeWith([], `Publisher → TCP transport on ${DATABASE_LABEL.sqlite}`, () => {
  let consumer: Awaited<ReturnType<typeof startConsumer>>;
  const fx = useOutboxApp('sqlite', async ({ defer }) => {
    const port = await freePort();
    consumer = await startConsumer(['OrderPlaced'], {
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port, deserializer: new OutboxEnvelopeDeserializer() },
    });
    defer(() => consumer.close());
    return { client: { transport: Transport.TCP, options: { host: '127.0.0.1', port } } as never };
  });

  it('delivers pattern, the unwrapped payload and the message id (envelope + OutboxEnvelopeDeserializer)', async () => {
    const { outbox } = fx;
    const id = await outbox.transaction(() => outbox.emit('OrderPlaced', { orderId: 7, items: ['a', 'b'] }));
    await waitFor(() => consumer.received.length >= 1, 'the TCP consumer to receive OrderPlaced');
    const [message] = consumer.received;
    expect(message.pattern).toBe('OrderPlaced');
    expect(message.data).toEqual({ orderId: 7, items: ['a', 'b'] });
    expect(message.messageId).toBe(id);
  });
});
