import { ModulesContainer } from '@nestjs/core';
import { EventPattern, Transport } from '@nestjs/microservices';
import { assertAckMode, RpcServers } from './consumer-ack-mode';

class Consumers {
  @EventPattern('Placed')
  onPlaced() {}

  @EventPattern({ cmd: 'shipped', v: 1 })
  onShipped() {}

  @EventPattern('Placed', Transport.NATS)
  onPlacedOverNats() {}
}
const { onPlaced, onShipped, onPlacedOverNats } = Consumers.prototype;

/** A server as Nest's ServerRMQ exposes it: transport, queue, noAck and its handlers by pattern. */
function rabbit(queue: string, noAck: unknown, patterns: Record<string, { next?: unknown }>) {
  return {
    transportId: Transport.RMQ,
    queue,
    noAck,
    getHandlerByPattern: (pattern: string) => patterns[pattern] ?? null,
  };
}

function serversOf(...servers: object[]): RpcServers {
  const modules = new ModulesContainer();
  for (const server of servers) modules.addRpcTarget(server);
  return new RpcServers(modules);
}

const where = '@Idempotent() on Consumers.onPlaced';

describe('RpcServers.ackModeOf', () => {
  it.each([
    ['left out, noAck: false', false, undefined, true],
    ['left out, noAck: true', true, undefined, false],
    ['true, noAck: false', false, true, true],
    ['false, noAck: true', true, false, false],
  ])('derives or keeps manualAck (%s)', (_label, noAck, given, manualAck) => {
    const mode = serversOf(rabbit('orders', noAck, { Placed: {} })).ackModeOf(where, onPlaced, given);
    expect(mode).toEqual({ manualAck });
    expect(() => assertAckMode(mode)).not.toThrow();
  });

  it('refuses manualAck: true on a noAck: true consumer, naming both settings, the queue and the fix', () => {
    const mode = serversOf(rabbit('orders', true, { Placed: {} })).ackModeOf(where, onPlaced, true);
    expect(mode.manualAck).toBe(false); // never acks on that channel, even before start-up fails
    expect(() => assertAckMode(mode)).toThrow(
      expect.objectContaining({
        code: 'OUTBOX_ACK_MODE',
        message: expect.stringMatching(/manualAck: true, but .*queue 'orders' runs with noAck: true.*Fix:/),
      }),
    );
  });

  it('refuses manualAck: false when nobody else acks for a noAck: false consumer, and a shared pattern with no choice', () => {
    const alone = serversOf(rabbit('orders', false, { Placed: {} })).ackModeOf(where, onPlaced, false);
    expect(alone.problem).toMatch(/manualAck: false, but .*noAck: false/);
    const shared = serversOf(rabbit('orders', false, { Placed: { next: () => undefined } }));
    expect(shared.ackModeOf(where, onPlaced, undefined).problem).toMatch(/shares its pattern/);
    expect(shared.ackModeOf(where, onPlaced, false)).toEqual({ manualAck: false });
    expect(shared.ackModeOf(where, onPlaced, true)).toEqual({ manualAck: true });
  });

  it('matches object patterns whatever their key order, and honours @EventPattern(pattern, transport)', () => {
    // An object pattern is passed as JSON, which Nest's getHandlerByPattern parses and normalises.
    const normalising = serversOf({
      ...rabbit('orders', false, {}),
      getHandlerByPattern: (p: string) => (JSON.parse(p).cmd === 'shipped' ? {} : null),
    });
    expect(normalising.ackModeOf(where, onShipped, undefined)).toEqual({ manualAck: true });
    // Declared for NATS only: not on the RabbitMQ server, although that server has a handler of 'Placed'.
    const placed = serversOf(rabbit('orders', false, { Placed: {} }));
    expect(placed.ackModeOf(where, onPlacedOverNats, undefined)).toEqual({ manualAck: false });
  });

  it('falls back to the value given where the mode cannot be told, warning when none was given', () => {
    const none = serversOf({ transportId: Transport.TCP, getHandlerByPattern: () => ({}) });
    expect(none.ackModeOf(where, onPlaced, undefined)).toEqual({ manualAck: false });
    const custom = serversOf(rabbit('orders', undefined, { Placed: {} }));
    expect(custom.ackModeOf(where, onPlaced, true)).toEqual({ manualAck: true, unknown: undefined });
    expect(custom.ackModeOf(where, onPlaced, undefined)).toMatchObject({
      manualAck: false,
      unknown: expect.stringMatching(/does not say whether it runs with noAck/),
    });
    const mixed = serversOf(rabbit('orders', false, { Placed: {} }), rabbit('audit', true, { Placed: {} }));
    expect(mixed.ackModeOf(where, onPlaced, true)).toEqual({ manualAck: true, unknown: undefined });
    expect(mixed.ackModeOf(where, onPlaced, undefined).unknown).toMatch(
      /'orders' \(noAck: false\), 'audit' \(noAck: true\)/,
    );
  });

  it('sees servers created after it (the registry replays and keeps emitting)', () => {
    const modules = new ModulesContainer();
    const servers = new RpcServers(modules);
    expect(servers.ackModeOf(where, onPlaced, undefined)).toEqual({ manualAck: false });
    modules.addRpcTarget(rabbit('orders', false, { Placed: {} }));
    expect(servers.ackModeOf(where, onPlaced, undefined)).toEqual({ manualAck: true });
  });
});
