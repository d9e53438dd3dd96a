import type { ModulesContainer } from '@nestjs/core';
import { ServerRMQ, Transport } from '@nestjs/microservices';
import { PATTERN_METADATA, TRANSPORT_METADATA } from '@nestjs/microservices/constants';
import { OutboxAckModeError } from '../errors';

/**
 * How the RabbitMQ consumers of the app acknowledge, read from Nest's servers when the app boots, so that
 * `manualAck` never contradicts them: acking a delivery of a `noAck: true` consumer closes the channel
 * (`PRECONDITION_FAILED - unknown delivery tag`, the messages in flight on it are lost), and a `noAck: false`
 * consumer nobody acks keeps its messages unacknowledged until the channel closes.
 *
 * The servers come from `ModulesContainer.getRpcTargetRegistry()` (Nest 11 and 12: every `connectMicroservice()`
 * and `createMicroservice()` adds its server when it is created, replayed to later subscribers), and a handler is
 * on a server when the server has a handler of one of its patterns (`getHandlerByPattern`, honouring
 * `@EventPattern(pattern, transport)`). The ack mode is the server's `noAck` (Nest's `ServerRMQ` keeps the option
 * there, defaulting to true as Nest does).
 */

/** What the library does about one handler's acks, and why. */
export interface ConsumerAckMode {
  /** Whether the interceptor acks and requeues the handler's messages itself. */
  manualAck: boolean;
  /** Set when the handler's settings contradict its consumers: what is wrong and the fix (refused at start-up). */
  problem?: string;
  /**
   * Set when `manualAck` is not given and cannot be derived (a RabbitMQ server whose ack mode cannot be read, or
   * queues with different ack modes): it is then false, and this is warned about at start-up.
   */
  unknown?: string;
}

/** A Nest server as far as this file reads it. */
interface RpcServer {
  transportId?: unknown;
  noAck?: unknown;
  queue?: unknown;
  getHandlerByPattern?(pattern: string): { next?: unknown } | null;
}

/** The microservice servers of one app, collected as Nest creates them. */
export class RpcServers {
  private readonly servers: RpcServer[] = [];

  constructor(modules?: ModulesContainer) {
    // Optional: an older Nest without the registry leaves every handler undetermined (manualAck as given).
    const registry = (modules as { getRpcTargetRegistry?: () => { subscribe(next: (s: unknown) => void): unknown } })
      ?.getRpcTargetRegistry;
    registry?.call(modules).subscribe((server) => {
      if (server && typeof server === 'object') this.servers.push(server as RpcServer);
    });
  }

  /**
   * The ack mode of the handler `handler` of `controller` (`where` names it in messages), given `manualAck` as
   * set in `@Idempotent()` or the module's `idempotency` options (undefined: not set).
   */
  ackModeOf(where: string, handler: Function, given: boolean | undefined): ConsumerAckMode {
    const consumers = this.rabbitConsumersOf(handler);
    const fallback = given ?? false;
    if (consumers.length === 0) return { manualAck: fallback };
    const unknown = consumers.find((c) => c.noAck === undefined);
    if (unknown) {
      return {
        manualAck: fallback,
        unknown:
          given === undefined
            ? `${where}: the RabbitMQ server of queue '${unknown.queue}' does not say whether it runs with noAck ` +
              '(a custom strategy?), so `manualAck` is false: the library never acks its messages. Set it ' +
              'explicitly: true for a noAck: false consumer, false for noAck: true.'
            : undefined,
      };
    }
    if (consumers.some((c) => c.noAck !== consumers[0].noAck)) {
      // Nest registers every handler on every server: which queue carries the pattern is the app's business.
      const list = consumers.map((c) => `'${c.queue}' (noAck: ${c.noAck})`).join(', ');
      return {
        manualAck: fallback,
        unknown:
          given === undefined
            ? `${where}: its pattern is handled on RabbitMQ queues with different ack modes, ${list}, so ` +
              '`manualAck` cannot be derived and is false. Set it explicitly for the queue that carries its ' +
              'messages: true for a noAck: false queue, false for noAck: true.'
            : undefined,
      };
    }
    const mode = decide(where, consumers[0], given);
    if (mode.problem) return { ...mode, manualAck: safeValue(consumers, given) };
    return mode;
  }

  /** The RabbitMQ servers that deliver `handler`'s patterns: their queue, noAck and whether the pattern is shared. */
  private rabbitConsumersOf(handler: Function): { queue: string; noAck?: boolean; shared: boolean }[] {
    const patterns: unknown[] = Reflect.getMetadata(PATTERN_METADATA, handler) ?? [];
    const transport: unknown = Reflect.getMetadata(TRANSPORT_METADATA, handler);
    const found: { queue: string; noAck?: boolean; shared: boolean }[] = [];
    for (const server of this.servers) {
      if (!(server instanceof ServerRMQ) && server.transportId !== Transport.RMQ) continue;
      if (transport !== undefined && server.transportId !== undefined && transport !== server.transportId) continue;
      if (typeof server.getHandlerByPattern !== 'function') continue;
      const heads = patterns
        .map((p) => server.getHandlerByPattern!(typeof p === 'string' ? p : JSON.stringify(p)))
        .filter((h): h is { next?: unknown } => !!h);
      if (heads.length === 0) continue;
      found.push({
        queue: typeof server.queue === 'string' ? server.queue : '?',
        noAck: typeof server.noAck === 'boolean' ? server.noAck : undefined,
        // Several event handlers of one pattern are chained by Nest: each gets every message.
        shared: heads.some((h) => h.next !== undefined && h.next !== null),
      });
    }
    return found;
  }
}

/** The ack mode for one consumer; `problem` when the given `manualAck` contradicts it. */
function decide(
  where: string,
  consumer: { queue: string; noAck?: boolean; shared: boolean },
  given: boolean | undefined,
): ConsumerAckMode {
  const { queue, shared } = consumer;
  if (consumer.noAck) {
    if (given !== true) return { manualAck: false };
    return {
      manualAck: false,
      problem:
        `${where} sets manualAck: true, but the RabbitMQ consumer of queue '${queue}' runs with noAck: true ` +
        "(Nest's default): the broker counts each message delivered, and an ack from the library closes the channel " +
        '(PRECONDITION_FAILED - unknown delivery tag), losing the messages in flight on it. Fix: start the consumer ' +
        'with noAck: false (at-least-once: the message is acked after its transaction commits), or leave manualAck ' +
        'out (derived from the consumer).',
    };
  }
  if (given === true) return { manualAck: true };
  if (!shared) {
    if (given === undefined) return { manualAck: true };
    return {
      manualAck: false,
      problem:
        `${where} sets manualAck: false, but the RabbitMQ consumer of queue '${queue}' runs with noAck: false and ` +
        'no other handler of its pattern acks: its messages would stay unacknowledged (and skipped duplicates never ' +
        'acked) until the channel closes. Fix: leave manualAck out (derived: the library acks after the commit), ' +
        'or set it true; the handler must not ack itself.',
    };
  }
  if (given === false) return { manualAck: false };
  return {
    manualAck: false,
    problem:
      `${where} shares its pattern with another handler on the RabbitMQ consumer of queue '${queue}' (noAck: ` +
      'false): each message must be acked exactly once (a second ack closes the channel). Fix: set manualAck: true ' +
      'on the one handler that acks and manualAck: false on the others.',
  };
}

/** What a handler whose settings are refused does until the app fails to start: never acks on a noAck consumer. */
function safeValue(consumers: { noAck?: boolean }[], given: boolean | undefined): boolean {
  return consumers.some((c) => c.noAck) ? false : (given ?? false);
}

/** Throws the refusal of `mode`, if any. */
export function assertAckMode(mode: ConsumerAckMode): void {
  if (mode.problem) throw new OutboxAckModeError(mode.problem);
}
