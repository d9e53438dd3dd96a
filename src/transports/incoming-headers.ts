import { KafkaContext, MqttContext, NatsContext, RmqContext } from '@nestjs/microservices';
import { envelopeOf } from './outbox-envelope';

/**
 * The headers an outbox message arrived with, as plain strings: RabbitMQ message headers, NATS headers, MQTT 5
 * user properties, Kafka record headers, or the outbox envelope's headers on TCP and Redis.
 */
export function incomingHeaders(data: unknown, ctx: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  const put = (name: string, value: unknown) => {
    if (Buffer.isBuffer(value)) value = value.toString('utf8');
    if (Array.isArray(value)) value = value[0];
    if (typeof value === 'string') out[name.toLowerCase()] = value;
  };
  if (ctx instanceof RmqContext) {
    for (const [name, value] of Object.entries((ctx.getMessage() as any)?.properties?.headers ?? {})) put(name, value);
  } else if (ctx instanceof NatsContext) {
    const headers = ctx.getHeaders() as { keys?: () => string[]; get?: (name: string) => string } | undefined;
    if (typeof headers?.keys === 'function' && typeof headers.get === 'function') {
      for (const name of headers.keys()) put(name, headers.get(name));
    }
  } else if (ctx instanceof MqttContext) {
    for (const [name, value] of Object.entries((ctx.getPacket() as any)?.properties?.userProperties ?? {}))
      put(name, value);
  } else if (ctx instanceof KafkaContext) {
    for (const [name, value] of Object.entries((ctx.getMessage() as any)?.headers ?? {})) put(name, value);
  }
  const envelope = envelopeOf(data);
  if (envelope) for (const [name, value] of Object.entries(envelope.headers)) if (!(name in out)) put(name, value);
  return out;
}
