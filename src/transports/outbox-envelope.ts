/**
 * On transports with no header channel (TCP, Redis) the message travels in an envelope:
 * `{ "$outbox": { "id": "…", "headers": { … } }, "payload": … }`. `OutboxEnvelopeDeserializer` on the consumer
 * unwraps it, so handlers receive the payload itself and `getOutboxMessageId()` finds the id.
 */
export const ENVELOPE_FIELD = '$outbox';

export interface OutboxEnvelope {
  [ENVELOPE_FIELD]: { id: string; headers?: Record<string, string> };
  payload: unknown;
}

export function isOutboxEnvelope(value: unknown): value is OutboxEnvelope {
  if (typeof value !== 'object' || value === null) return false;
  const meta = (value as Record<string, any>)[ENVELOPE_FIELD];
  return typeof meta === 'object' && meta !== null && typeof meta.id === 'string' && 'payload' in value;
}

/** Message ids of unwrapped payload objects (a WeakMap: nothing is kept once the payload is gone). */
const unwrappedIds = new WeakMap<object, { id: string; headers: Record<string, string> }>();

export function rememberEnvelope(payload: unknown, envelope: OutboxEnvelope): void {
  if (typeof payload === 'object' && payload !== null) {
    unwrappedIds.set(payload, { id: envelope[ENVELOPE_FIELD].id, headers: envelope[ENVELOPE_FIELD].headers ?? {} });
  }
}

export function envelopeOf(payload: unknown): { id: string; headers: Record<string, string> } | undefined {
  if (typeof payload === 'object' && payload !== null) {
    if (isOutboxEnvelope(payload))
      return { id: payload[ENVELOPE_FIELD].id, headers: payload[ENVELOPE_FIELD].headers ?? {} };
    return unwrappedIds.get(payload);
  }
  return undefined;
}
