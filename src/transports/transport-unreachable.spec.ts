import { Logger } from '@nestjs/common';
import { ClientProxy, ClientProxyFactory, Transport } from '@nestjs/microservices';
import { createServer } from 'node:net';
import { OutboxNonRetryableError, OutboxPublishTimeoutError } from '../errors';
import { describeFailure } from '../util/describe-error';
import { dispatchEvent } from './dispatch';
import { isDisconnectedStatus, isTransportUnreachable } from './transport-unreachable';

/** A port nothing listens on (it was free a moment ago). */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** What the publisher's dispatch step rejects with when `client` cannot reach its broker. */
async function rejection(client: ClientProxy): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      dispatchEvent(client, 'OrderPlaced', { n: 1 }),
      new Promise(
        (_, reject) =>
          (timer = setTimeout(() => reject(new Error('the client neither failed nor published in 10 s')), 10_000)),
      ),
    ]);
  } catch (error) {
    return error;
  } finally {
    clearTimeout(timer);
    await Promise.resolve(client.close()).catch(() => undefined);
  }
  throw new Error('dispatch resolved against a closed port');
}

const SECRET = 'Cl0sedP0rtSecret';

describe('isTransportUnreachable, against the errors real Nest clients produce at a closed port', () => {
  let port: number;
  beforeAll(async () => {
    Logger.overrideLogger(false); // the clients log their connection errors
    port = await closedPort();
  });
  afterAll(() => Logger.overrideLogger(['log', 'error', 'warn', 'debug', 'verbose']));

  const cases: Array<[string, () => ClientProxy]> = [
    [
      'RabbitMQ (amqp-connection-manager { err, url })',
      () =>
        ClientProxyFactory.create({
          transport: Transport.RMQ,
          options: { urls: [`amqp://guest:${SECRET}@127.0.0.1:${port}`], queue: 'q' },
        }),
    ],
    [
      'NATS (NatsError CONNECTION_REFUSED)',
      () =>
        ClientProxyFactory.create({
          transport: Transport.NATS,
          options: { servers: [`nats://user:${SECRET}@127.0.0.1:${port}`] },
        }),
    ],
    [
      'MQTT (ECONNREFUSED)',
      () =>
        ClientProxyFactory.create({
          transport: Transport.MQTT,
          options: { url: `mqtt://user:${SECRET}@127.0.0.1:${port}`, reconnectPeriod: 0 },
        }),
    ],
    [
      'Redis (ioredis "Connection is closed.")',
      () =>
        ClientProxyFactory.create({
          transport: Transport.REDIS,
          options: { host: '127.0.0.1', port, password: SECRET, retryAttempts: 0 },
        }),
    ],
    [
      'TCP (ECONNREFUSED)',
      () => ClientProxyFactory.create({ transport: Transport.TCP, options: { host: '127.0.0.1', port } }),
    ],
  ];

  it.each(cases)('%s is unreachable, and its description carries no credential', async (_name, create) => {
    const error = await rejection(create());
    expect(isTransportUnreachable(error)).toBe(true);
    expect(describeFailure(error)).not.toContain(SECRET);
    expect(describeFailure(error)).toMatch(/127\.0\.0\.1|CONNECTION_REFUSED|Connection is closed/);
  });

  it('an unknown host (DNS) is unreachable', async () => {
    const error = await rejection(
      ClientProxyFactory.create({
        transport: Transport.RMQ,
        options: { urls: [`amqp://guest:${SECRET}@no-such-host.invalid:5672`], queue: 'q' },
      }),
    );
    expect(isTransportUnreachable(error)).toBe(true);
    expect(describeFailure(error)).toContain('amqp://***@no-such-host.invalid:5672');
  });

  it("a connection lost later is unreachable: Nest's reconnecting rejection and the socket errors underneath", () => {
    // Captured from ClientRMQ/ClientNats/ClientMqtt/ClientRedis 11.2.6 after their connection was cut (a string).
    expect(isTransportUnreachable('Error: Connection lost. Trying to reconnect...')).toBe(true);
    expect(isTransportUnreachable(new Error('Not connected.'))).toBe(true); // amqp-connection-manager ChannelWrapper
    expect(isTransportUnreachable(new Error('Channel closed'))).toBe(true); // its unsent messages at close
    expect(isTransportUnreachable(new Error('Unexpected close'))).toBe(true); // amqplib
    expect(isTransportUnreachable(new Error('Connection is closed.'))).toBe(true); // ioredis
    expect(isTransportUnreachable(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }))).toBe(true);
    const dualStack = new AggregateError([
      Object.assign(new Error('a'), { code: 'ECONNREFUSED' }),
      Object.assign(new Error('b'), { code: 'EHOSTUNREACH' }),
    ]);
    expect(isTransportUnreachable(dualStack)).toBe(true);
  });

  it('a publish timeout is unreachable only while the client reports itself disconnected', () => {
    const timeout = new OutboxPublishTimeoutError('No confirmation within 500 ms (outcome unknown; will retry)');
    expect(isTransportUnreachable(timeout, { connected: false })).toBe(true);
    expect(isTransportUnreachable(timeout, { connected: true })).toBe(false);
    expect(isTransportUnreachable(timeout)).toBe(false);
    expect(['disconnected', 'reconnecting', 'closed'].every(isDisconnectedStatus)).toBe(true);
    expect(['connected', 'reconnected', 'unblocked', undefined].some(isDisconnectedStatus)).toBe(false);
  });

  it('failures of the message itself count: non-retryable, unserializable, rejected by the broker', async () => {
    expect(isTransportUnreachable(new OutboxNonRetryableError('connect ECONNREFUSED (the app says: give up)'))).toBe(
      false,
    );
    // A real serializer failure of ClientRMQ (it stringifies before it touches the channel).
    const client = ClientProxyFactory.create({
      transport: Transport.RMQ,
      options: { urls: [`amqp://127.0.0.1:${port}`], queue: 'q' },
    });
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const unserializable = await (client as any)
      .dispatchEvent({ pattern: 'E', data: circular })
      .catch((e: unknown) => e);
    expect(unserializable).toBeInstanceOf(TypeError);
    expect(isTransportUnreachable(unserializable)).toBe(false);
    expect(isTransportUnreachable(new Error('message nacked'))).toBe(false); // amqp-connection-manager, broker nack
    expect(
      isTransportUnreachable(
        new Error('Channel closed by server: 404 (NOT-FOUND) with message "NOT_FOUND - no exchange \'x\'"'),
      ),
    ).toBe(false);
    expect(isTransportUnreachable(new Error('broker said no'))).toBe(false);
  });
});
