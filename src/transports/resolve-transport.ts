import {
  ClientKafka,
  ClientMqtt,
  ClientNats,
  ClientProxy,
  ClientRedis,
  ClientRMQ,
  ClientTCP,
} from '@nestjs/microservices';
import { OutboxConfigurationError } from '../errors';
import type { OutboxTransportName } from '../outbox.options';
import { EnvelopeOutboxTransport } from './envelope.transport';
import { KafkaOutboxTransport } from './kafka.transport';
import { MqttOutboxTransport } from './mqtt.transport';
import { NatsOutboxTransport } from './nats.transport';
import type { OutboxTransport } from './outbox-transport';
import { RmqOutboxTransport } from './rmq.transport';

/** Detects the transport of a client from its class. */
export function detectTransport(client: ClientProxy<any, any>): OutboxTransportName | undefined {
  if (client instanceof ClientRMQ) return 'rmq';
  if (client instanceof ClientTCP) return 'tcp';
  if (client instanceof ClientRedis) return 'redis';
  if (client instanceof ClientNats) return 'nats';
  if (client instanceof ClientMqtt) return 'mqtt';
  if (client instanceof ClientKafka) return 'kafka';
  return undefined;
}

/** The transport adapter for `name` (or the client's detected transport when `name` is 'auto'). */
export function resolveTransport(name: OutboxTransportName | 'auto', client: ClientProxy<any, any>): OutboxTransport {
  const resolved = name === 'auto' ? detectTransport(client) : name;
  switch (resolved) {
    case 'rmq':
      return new RmqOutboxTransport();
    case 'tcp':
    case 'redis':
      return new EnvelopeOutboxTransport(resolved);
    case 'nats':
      return new NatsOutboxTransport();
    case 'mqtt':
      return new MqttOutboxTransport();
    case 'kafka':
      return new KafkaOutboxTransport();
    case undefined:
      throw new OutboxConfigurationError(
        `OutboxModule could not detect the transport of client ${client?.constructor?.name ?? typeof client}. ` +
          `Set the \`transport\` option ('rmq', 'tcp', 'nats', 'mqtt', 'redis' or 'kafka').`,
      );
    default:
      throw new OutboxConfigurationError(
        `OutboxModule transport '${String(resolved)}' is unknown. Use 'rmq', 'tcp', 'nats', 'mqtt', 'redis' or 'kafka'.`,
      );
  }
}
