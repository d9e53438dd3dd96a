import { Injectable } from '@nestjs/common';
import { ClientsModule, Transport } from '@nestjs/microservices';
import { randomBytes } from 'node:crypto';
import { OnOutboxEvent, OutboxConfigurationError, OutboxDeadLetters, OutboxEventContext } from '../src';
import { OutboxRouteMessage } from '../src/destinations/outbox-route.types';
import { OutboxDatabase } from '../src/dialects/outbox-database';
import { deleteQueue, rmqClientOptions, rmqConsumerOptions, startConsumer, uniqueQueue } from './helpers/consumers';
import { useOutboxApp } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith, SERVICES } from './helpers/services';
import { TcpProxy } from './helpers/tcp-proxy';

/**
 * One outbox, two brokers: `route.select()` sends `audit.*` to NATS and the rest to RabbitMQ. Each client goes
 * through a TCP proxy owned by the test, so one broker can be cut without touching the shared services.
 */
describeWith(['postgres', 'rabbitmq', 'nats'], 'Routing one outbox to RabbitMQ and NATS', () => {
  const suffix = randomBytes(4).toString('hex');
  const order = `orders.placed.${suffix}`;
  const audit = `audit.logged.${suffix}`;
  const misrouted = `misrouted.${suffix}`;
  const local = `local.${suffix}`;

  /** In-process handlers beside the brokers: one on the RabbitMQ-routed pattern, one on a pattern kept local. */
  @Injectable()
  class Projections {
    readonly runs: Array<{ pattern: string; id: string }> = [];
    /** Failed runs of the orders' handler (payload `failures`: how many attempts fail first). */
    readonly failed: string[] = [];

    @OnOutboxEvent(order)
    onOrder(payload: { failures?: number }, context: OutboxEventContext) {
      if (context.attempts <= (payload.failures ?? 0)) {
        this.failed.push(context.messageId);
        throw new Error(`projection of ${context.messageId} failed`);
      }
      this.runs.push({ pattern: context.pattern, id: context.messageId });
    }

    @OnOutboxEvent(local)
    onLocal(_payload: unknown, context: OutboxEventContext) {
      this.runs.push({ pattern: context.pattern, id: context.messageId });
    }
  }
  const runsOf = (id: string) => fx.app.get(Projections).runs.filter((r) => r.id === id).length;
  const patterns = [order, audit];
  let rmqProxy: TcpProxy;
  let natsProxy: TcpProxy;
  let rmq: Awaited<ReturnType<typeof startConsumer>>;
  let nats: Awaited<ReturnType<typeof startConsumer>>;
  const select = ({ pattern }: OutboxRouteMessage) => {
    if (pattern === local) return null; // in-process handlers only
    if (pattern === misrouted) return 'NOPE';
    return pattern.startsWith('audit.') ? 'AUDIT_NATS' : 'ORDERS_RMQ';
  };

  const fx = useOutboxApp('postgres', async ({ defer }) => {
    rmqProxy = await new TcpProxy(SERVICES.rabbitmq.host, SERVICES.rabbitmq.port).start();
    defer(() => rmqProxy.stop());
    natsProxy = await new TcpProxy(SERVICES.nats.host, SERVICES.nats.port).start();
    defer(() => natsProxy.stop());
    const queue = uniqueQueue('outbox-route');
    defer(() => deleteQueue(queue));
    // The consumers connect to the brokers directly and listen to both patterns, to see a message on the wrong one.
    rmq = await startConsumer(patterns, rmqConsumerOptions(queue));
    defer(() => rmq.close());
    const servers = [`nats://${SERVICES.nats.host}:${SERVICES.nats.port}`];
    nats = await startConsumer(patterns, { transport: Transport.NATS, options: { servers } });
    defer(() => nats.close());
    return {
      logger: false,
      providers: [Projections],
      imports: [
        ClientsModule.register([
          { name: 'ORDERS_RMQ', ...rmqClientOptions(queue, `amqp://guest:guest@127.0.0.1:${rmqProxy.port}`) } as never,
          {
            name: 'AUDIT_NATS',
            transport: Transport.NATS,
            options: { servers: [`nats://127.0.0.1:${natsProxy.port}`] },
          },
        ]),
      ],
      outbox: {
        client: undefined,
        route: { clients: ['ORDERS_RMQ', 'AUDIT_NATS'], select },
        publisher: { pollingInterval: 50, publishTimeout: 1000 },
        retry: { initialDelay: 50, maxDelay: 250, maxAttempts: 3, jitter: 0 },
      },
    };
  });

  const emitAll = (messages: Array<{ pattern: string; n: number; key?: string; failures?: number }>) =>
    fx.outbox.transaction(async () => {
      const ids: string[] = [];
      for (const { pattern, n, key, failures } of messages) {
        ids.push(await fx.outbox.emit(pattern, { n, failures }, key ? { key } : {}));
      }
      return ids;
    });
  const idsAt = (consumer: typeof rmq, pattern: string) =>
    consumer.received.filter((r) => r.pattern === pattern).map((r) => r.messageId ?? '(no id)');
  /** The status of a message's row for one destination (its only row when none is given). */
  const statusOf = async (id: string, destination?: string) => {
    const rows: Array<{ status: string; destination: string }> = await fx.dataSource.query(
      `SELECT status, destination FROM outbox_messages WHERE message_id = $1`,
      [id],
    );
    const mine = destination === undefined ? rows : rows.filter((r) => r.destination === destination);
    if (mine.length > 1) throw new Error(`Message ${id} has ${mine.length} rows: name the destination`);
    return mine[0]?.status;
  };
  const destinationsOf = async (id: string) =>
    (await fx.dataSource.query(`SELECT destination FROM outbox_messages WHERE message_id = $1 ORDER BY seq`, [id])).map(
      (r: { destination: string }) => r.destination,
    );

  it('delivers each message to the broker select() names, once', async () => {
    const batch = Array.from({ length: 20 }, (_, n) => ({
      pattern: n % 2 ? audit : order,
      n,
      key: n % 4 < 2 ? `k${n % 3}` : undefined,
    }));
    const ids = await emitAll(batch);
    const orderIds = ids.filter((_, i) => batch[i].pattern === order);
    const auditIds = ids.filter((_, i) => batch[i].pattern === audit);
    await waitFor(
      () => idsAt(rmq, order).length >= 10 && idsAt(nats, audit).length >= 10,
      'both brokers to get their messages',
    );
    await fx.outbox.flush();
    expect(idsAt(rmq, order).sort()).toEqual(orderIds.sort());
    expect(idsAt(nats, audit).sort()).toEqual(auditIds.sort());
    expect(idsAt(rmq, audit)).toEqual([]);
    expect(idsAt(nats, order)).toEqual([]);
  });

  it("cutting RabbitMQ holds back only RabbitMQ's messages; NATS's flow meanwhile, and RabbitMQ's follow once, in order", async () => {
    rmqProxy.cut();
    const batch = Array.from({ length: 10 }, (_, n) => ({ pattern: n % 2 ? audit : order, n, key: `cut-${n % 2}` }));
    const ids = await emitAll(batch);
    const orderIds = ids.filter((_, i) => batch[i].pattern === order);
    const auditIds = ids.filter((_, i) => batch[i].pattern === audit);
    await waitFor(
      () => auditIds.every((id) => idsAt(nats, audit).includes(id)),
      'NATS to get its messages during the cut',
    );
    expect(orderIds.filter((id) => idsAt(rmq, order).includes(id))).toEqual([]);
    const rmqStatus = (id: string) => statusOf(id, 'broker:ORDERS_RMQ');
    expect(await Promise.all(orderIds.map(rmqStatus))).toEqual(orderIds.map(() => 'pending'));
    // The in-process handler of the orders has rows of its own: it does not wait for their broker.
    await waitFor(
      () => orderIds.every((id) => runsOf(id) === 1),
      "the orders' in-process handler to run during the cut",
    );
    const handled = fx.app.get(Projections).runs.filter((r) => orderIds.includes(r.id));
    expect(handled.map((r) => r.id)).toEqual(orderIds); // in key order

    rmqProxy.restore();
    await waitFor(() => orderIds.every((id) => idsAt(rmq, order).includes(id)), 'RabbitMQ to get its messages', 40_000);
    const received = idsAt(rmq, order).filter((id) => orderIds.includes(id));
    expect(received).toEqual(orderIds); // once each, in key order
    // The consumer may get a message before the publisher marks it: wait for the marks.
    const allSent = async () => (await Promise.all(orderIds.map(rmqStatus))).every((status) => status === 'sent');
    await waitFor(allSent, "RabbitMQ's messages to be marked sent");
    // Retries of the broker's rows while RabbitMQ was down never ran the handler again.
    expect(orderIds.map(runsOf)).toEqual(orderIds.map(() => 1));
  });

  it("one key over both brokers: cutting RabbitMQ holds back only the key's RabbitMQ rows; its NATS rows arrive in order meanwhile", async () => {
    rmqProxy.cut();
    const key = `both-${suffix}`;
    const batch = Array.from({ length: 12 }, (_, n) => ({ pattern: n % 2 ? audit : order, n, key }));
    const ids = await emitAll(batch);
    const orderIds = ids.filter((_, i) => batch[i].pattern === order);
    const auditIds = ids.filter((_, i) => batch[i].pattern === audit);
    expect(await destinationsOf(orderIds[0])).toEqual(['broker:ORDERS_RMQ', `handler:Projections.onOrder`]);
    expect(await destinationsOf(auditIds[0])).toEqual(['broker:AUDIT_NATS']);
    await waitFor(
      () => auditIds.every((id) => idsAt(nats, audit).includes(id)),
      "NATS to get the key's messages during the cut",
    );
    expect(idsAt(nats, audit).filter((id) => auditIds.includes(id))).toEqual(auditIds); // once each, in order
    expect(orderIds.filter((id) => idsAt(rmq, order).includes(id))).toEqual([]);
    expect(await Promise.all(orderIds.map((id) => statusOf(id, 'broker:ORDERS_RMQ')))).toEqual(
      orderIds.map(() => 'pending'),
    );

    rmqProxy.restore();
    await waitFor(() => orderIds.every((id) => idsAt(rmq, order).includes(id)), 'RabbitMQ to get its messages', 40_000);
    expect(idsAt(rmq, order).filter((id) => orderIds.includes(id))).toEqual(orderIds); // once each, in order
  });

  it('a failing in-process handler is retried on its own row: the broker gets the message once', async () => {
    const [id] = await emitAll([{ pattern: order, n: 1, failures: 2 }]);
    await waitFor(async () => (await statusOf(id, `handler:Projections.onOrder`)) === 'sent', 'the handler to succeed');
    await waitFor(async () => (await statusOf(id, 'broker:ORDERS_RMQ')) === 'sent', 'the broker row to be sent');
    expect(fx.app.get(Projections).failed.filter((f) => f === id)).toHaveLength(2);
    expect(runsOf(id)).toBe(1);
    // A few more passes: nothing publishes the message again.
    await fx.outbox.flush();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(rmq.received.filter((r) => r.messageId === id)).toHaveLength(1);
    const attempts = await fx.dataSource.query(
      `SELECT destination, attempts FROM outbox_messages WHERE message_id = $1 ORDER BY seq`,
      [id],
    );
    expect(attempts.map((r: { attempts: number }) => Number(r.attempts))).toEqual([1, 3]);
  });

  it('a message select() routes to null reaches its in-process handler only', async () => {
    const [id] = await emitAll([{ pattern: local, n: 1 }]);
    await waitFor(async () => (await statusOf(id)) === 'sent', 'the local message to be handled');
    expect(runsOf(id)).toBe(1);
    expect([...rmq.received, ...nats.received].filter((r) => r.messageId === id)).toEqual([]);
  });

  it('a token select() returns that is not in route.clients dead-letters the message with OutboxRouteError', async () => {
    const [id] = await emitAll([{ pattern: misrouted, n: 1 }]);
    await waitFor(async () => (await statusOf(id)) === 'dead', 'the misrouted message to go dead');
    const detail = await fx.app.get(OutboxDeadLetters).get(id);
    expect(detail?.lastError).toMatch(
      /OutboxRouteError: .*returned 'NOPE'.*not in route\.clients \(ORDERS_RMQ, AUDIT_NATS\)\. Return one of those tokens/,
    );
    expect(detail?.attempts).toBe(3);
  });

  it('a row written for a broker client that is gone goes dead with OutboxNoDestinationError naming the fix', async () => {
    const { dialect, table } = fx.app.get(OutboxDatabase);
    const id = `gone-${suffix}`;
    const row = { messageId: id, pattern: order, payload: '{}', headers: null, key: null };
    await dialect.insert(fx.dataSource.manager, table, [{ ...row, destination: 'broker:OLD_RMQ' }]);
    await waitFor(async () => (await statusOf(id)) === 'dead', 'the row to go dead');
    const detail = await fx.app.get(OutboxDeadLetters).get(id);
    expect(detail?.lastError).toMatch(
      /OutboxNoDestinationError: .*destination 'broker:OLD_RMQ', but this outbox has no broker client named OLD_RMQ .*Add the client back/,
    );
    expect(detail?.attempts).toBe(3);
  });

  it('refuses to start when a client of route.clients does not exist, naming it and the fix', async () => {
    const started = fx.start({
      logger: false,
      outbox: { client: undefined, route: { clients: ['BROKER', 'MISSING_CLIENT'], select: () => 'BROKER' } },
    });
    await expect(started).rejects.toThrow(OutboxConfigurationError);
    await expect(started).rejects.toThrow(
      /option `route\.clients\[1\]` names MISSING_CLIENT, but no provider with that token exists\. Register it/,
    );
  });
});
