import { OutboxConfigurationError } from '../errors';
import type { OutboxCloudEventsOptions, OutboxTransportName } from '../outbox.options';
import { cloudEventOf } from './cloud-event';
import type { OutboxTransport } from './outbox-transport';

/** Transports with no header channel: binary content mode cannot be carried there. */
const HEADERLESS: readonly OutboxTransportName[] = ['tcp', 'redis'];

/**
 * `transport`, adding the CloudEvents attributes to every message it builds (each transport maps them to its
 * binding's headers); `transport` itself when `options` is false. Throws `OutboxConfigurationError` for TCP and
 * Redis, which carry no headers.
 */
export function withCloudEvents(
  transport: OutboxTransport,
  options: OutboxCloudEventsOptions | false | undefined,
): OutboxTransport {
  if (!options) return transport;
  if (HEADERLESS.includes(transport.name)) {
    throw new OutboxConfigurationError(
      `OutboxModule option cloudEvents needs a transport that carries headers (rmq, nats, mqtt, kafka), but the ` +
        `client's transport is '${transport.name}', whose messages have none. Remove cloudEvents, or publish ` +
        'through one of those transports.',
    );
  }
  return {
    name: transport.name,
    ready: transport.ready?.bind(transport),
    toRecord: (message) => transport.toRecord({ ...message, cloudEvent: cloudEventOf(message, options) }),
  };
}
