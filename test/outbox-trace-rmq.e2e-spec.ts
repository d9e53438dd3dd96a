import { Body, Controller, Post } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import request from 'supertest';
import { Idempotent, OutboxService, type OutboxTrace } from '../src';
import { deleteQueue, rmqClientOptions, rmqConsumerOptions, uniqueQueue } from './helpers/consumers';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/**
 * `OutboxService.trace()` through a broker: a request of key K emits two OrderPlaced events to RabbitMQ; an
 * `@EventPattern()` `@Idempotent()` consumer of the same app (same database) applies each and emits OrderShipped
 * for the second, which another `@Idempotent()` consumer applies. The trace shows the consumers' records.
 */
@Controller('orders')
class OrdersController {
  constructor(private readonly outbox: OutboxService) {}

  @Post()
  @Idempotent()
  async place(@Body() body: { ref: string }) {
    await this.outbox.emitMany([
      { pattern: 'OrderPlaced', payload: { ref: body.ref, n: 1 } },
      { pattern: 'OrderPlaced', payload: { ref: body.ref, n: 2 } },
    ]);
    return { placed: body.ref };
  }
}

@Controller()
class ShippingConsumer {
  constructor(private readonly outbox: OutboxService) {}

  @EventPattern('OrderPlaced')
  @Idempotent({ manualAck: true })
  async onPlaced(@Payload() data: { ref: string; n: number }) {
    if (data.n === 2) await this.outbox.emit('OrderShipped', { ref: data.ref });
  }

  @EventPattern('OrderShipped')
  @Idempotent({ manualAck: true })
  async onShipped(@Payload() _data: unknown) {}
}

const kinds: DatabaseKind[] = ['postgres', 'mariadb', 'sqlite'];

for (const kind of kinds) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `OutboxService.trace() through RabbitMQ @Idempotent() consumers on ${DATABASE_LABEL[kind]}`,
    () => {
      const queue = uniqueQueue('outbox-trace');
      const fixture = useOutboxApp(kind, ({ defer }) => {
        defer(() => deleteQueue(queue));
        return {
          logger: false,
          controllers: [OrdersController, ShippingConsumer],
          client: rmqClientOptions(queue),
          outbox: { publisher: { pollingInterval: 30 } },
          beforeInit: async (app) => {
            app.connectMicroservice(rmqConsumerOptions(queue));
            await app.startAllMicroservices();
          },
        };
      });
      const key = `K-rmq-${kind}-${Date.now().toString(36)}`;

      it("trace(K) shows the request, three messages sent, and each consumer's record", async () => {
        const res = await request(fixture.app.getHttpServer()).post('/orders').set('Idempotency-Key', key).send({
          ref: 'o1',
        });
        expect(res.status).toBe(201);
        let trace: OutboxTrace | undefined;
        await waitFor(async () => {
          trace = await fixture.outbox.trace(key);
          const shipped = trace.request?.emitted[1]?.consumers[0]?.emitted[0];
          const all = [...(trace.request?.emitted ?? []), ...(shipped ? [shipped] : [])];
          return all.length === 3 && all.every((m) => m.consumers.length === 1 && m.state === 'sent');
        }, 'the consumers to apply the three messages');
        const req = trace!.request!;
        expect(req).toMatchObject({ kind: 'request', scope: '', key, state: 'completed', responseStatus: 201 });
        expect(req.emitted.map((m) => [m.pattern, m.state])).toEqual([
          ['OrderPlaced', 'sent'],
          ['OrderPlaced', 'sent'],
        ]);
        for (const m of req.emitted) {
          expect(m.destinations.map((d) => d.state)).toEqual(['sent']);
          expect(m.consumers).toEqual([
            expect.objectContaining({ kind: 'consumer', scope: 'ShippingConsumer.onPlaced', key: m.messageId }),
          ]);
        }
        const [shipped] = req.emitted[1].consumers[0].emitted;
        expect(shipped).toMatchObject({
          pattern: 'OrderShipped',
          state: 'sent',
          cause: { scope: 'ShippingConsumer.onPlaced', key: req.emitted[1].messageId },
          consumers: [expect.objectContaining({ kind: 'consumer', scope: 'ShippingConsumer.onShipped' })],
        });
        expect(req.emitted[0].consumers[0].emitted).toEqual([]);

        // The message id shows the same subtree.
        expect((await fixture.outbox.trace(req.emitted[1].messageId)).message).toEqual(req.emitted[1]);
      });
    },
  );
}
