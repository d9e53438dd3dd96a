import { Injectable } from '@nestjs/common';
import { RmqRecordSerializer } from '@nestjs/microservices/serializers/rmq-record.serializer';
import { OnOutboxEvent, OutboxDeadLetters, OutboxEventContext, OutboxMessage, OutboxPublisher } from '../src';
import type { OutboxDeadEvent } from '../src/events/publisher-events';
import type { OutboxRetryMessage } from '../src/retry.options';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { deleteQueue, rmqClientOptions, uniqueQueue } from './helpers/consumers';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/**
 * The broker's client refuses to encode a message whose payload says `fail` — a failure of the message itself,
 * which counts toward its pattern's `maxAttempts` (an outage never does: its attempts are given back). `fatal`
 * throws a `SyntaxError`, which the module's `retryIf` refuses to retry.
 */
class FailingSerializer extends RmqRecordSerializer {
  serialize(packet: any): any {
    const data = packet?.data?.data ?? packet?.data;
    if (data?.fail === 'fatal') throw new SyntaxError('cannot encode: malformed');
    if (data?.fail) throw new Error('cannot encode: rejected');
    return super.serialize(packet);
  }
}

/** An in-process handler of an `audit.*` pattern that always fails: it takes the `audit.*` policy too. */
@Injectable()
class AuditProjection {
  runs = 0;
  @OnOutboxEvent('audit.projected')
  project(_payload: unknown, _context: OutboxEventContext) {
    this.runs++;
    throw new Error('projection store down');
  }
}

const kinds: DatabaseKind[] = ['postgres', 'mariadb', 'sqlite'];

for (const kind of kinds) {
  describeWith([...servicesOf(kind), 'rabbitmq'], `Retry policies per pattern on ${DATABASE_LABEL[kind]}`, () => {
    const queue = uniqueQueue('outbox-retry-policies');
    let recorder: AmqpRecorder;
    const dead: OutboxDeadEvent[] = [];
    const asked: Array<{ name: string; attempt: number; message: OutboxRetryMessage }> = [];
    const retryIf = (error: unknown, attempt: number, message: OutboxRetryMessage) => {
      asked.push({ name: (error as Error)?.name, attempt, message });
      return !(error instanceof SyntaxError);
    };

    const fx = useOutboxApp(kind, async ({ defer }) => {
      recorder = await new AmqpRecorder(queue).start();
      defer(() => recorder.stop());
      defer(() => deleteQueue(queue));
      return {
        client: rmqClientOptions(queue, undefined, { serializer: new FailingSerializer() }) as never,
        logger: false,
        providers: [AuditProjection],
        outbox: {
          publisher: { pollingInterval: 50 },
          retry: {
            maxAttempts: 5,
            initialDelay: 10,
            factor: 1,
            maxDelay: 50,
            jitter: 0,
            retryIf,
            patterns: { 'audit.*': { maxAttempts: 2 }, 'audit.kept': { maxAttempts: 3 } },
          },
        },
      };
    });

    it("takes each pattern's policy: audit.* dead after 2 attempts, the rest after 5, retryIf false at once", async () => {
      const { outbox, app } = fx;
      app.get(OutboxPublisher).on('dead', (e) => dead.push(e));
      const ids = await outbox.transaction(async () => ({
        audit: await outbox.emit('audit.login', { fail: 'yes' }),
        kept: await outbox.emit('audit.kept', { fail: 'yes' }),
        order: await outbox.emit('orders.placed', { fail: 'yes' }),
        fatal: await outbox.emit('orders.placed', { fail: 'fatal' }, { key: 'k1' }),
        handled: await outbox.emit('audit.projected', { n: 1 }),
        fine: await outbox.emit('audit.login', { n: 2 }),
      }));
      const failing = [ids.audit, ids.kept, ids.order, ids.fatal, ids.handled];
      await waitFor(
        () => failing.every((id) => dead.some((e) => e.messageId === id)),
        'the five failing messages to go dead',
        60_000,
      );
      const attemptsOf = (id: string) => dead.find((e) => e.messageId === id)!.attempts;
      expect({
        audit: attemptsOf(ids.audit),
        kept: attemptsOf(ids.kept),
        order: attemptsOf(ids.order),
        fatal: attemptsOf(ids.fatal),
        handled: attemptsOf(ids.handled),
      }).toEqual({ audit: 2, kept: 3, order: 5, fatal: 1, handled: 2 });
      // The handler ran once per attempt; the good message went through.
      expect(app.get(AuditProjection).runs).toBe(2);
      await waitFor(() => recorder.distinct().has(ids.fine), 'the good message to be published');
      // Rows and their history agree with the events.
      const rows = await fx.dataSource.getRepository(OutboxMessage).find();
      const byId = new Map(rows.map((r) => [r.messageId, r]));
      expect(byId.get(ids.order)).toMatchObject({ status: 'dead', attempts: 5 });
      expect(byId.get(ids.fatal)).toMatchObject({ status: 'dead', attempts: 1 });
      expect(byId.get(ids.fatal)!.lastError).toContain('SyntaxError: cannot encode: malformed');
      const letter = await app.get(OutboxDeadLetters).get(ids.audit);
      expect(letter?.history.map((a) => a.counted)).toEqual([true, true]);
      // retryIf was asked about each counted failure before the last, with the error, the attempt and the message.
      const order = asked.filter((a) => a.message.messageId === ids.order);
      expect(order.map((a) => [a.name, a.attempt])).toEqual([
        ['Error', 1],
        ['Error', 2],
        ['Error', 3],
        ['Error', 4],
      ]);
      expect(order[0].message).toMatchObject({ pattern: 'orders.placed', payload: { fail: 'yes' }, destination: '' });
      const fatal = asked.filter((a) => a.message.messageId === ids.fatal);
      expect(fatal.map((a) => [a.name, a.attempt, a.message.key])).toEqual([['SyntaxError', 1, 'k1']]);
      // A handler's own error, not the library's wrapper.
      const handled = asked.filter((a) => a.message.messageId === ids.handled);
      expect(handled.map((a) => [a.name, a.attempt])).toEqual([['Error', 1]]);
    });
  });
}
