import type { OutboxCloudEventsOptions } from '../outbox.options';

/** The CloudEvents 1.0 context attributes of one outbox message, as binary content mode carries them. */
export interface CloudEventAttributes {
  specversion: '1.0';
  /** The outbox message id. */
  id: string;
  /** The message's pattern. */
  type: string;
  source: string;
  /** RFC 3339 (UTC, milliseconds). */
  time: string;
  /** The content type of the message body. */
  datacontenttype: 'application/json';
}

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/**
 * When the event was written: the time of `emit()` a UUIDv7 message id carries (the library's own ids), else
 * `now` (a message id of the caller's own).
 */
export function occurredAt(messageId: string, now: () => number = Date.now): Date {
  if (UUID_V7.test(messageId)) return new Date(parseInt(messageId.replace(/-/g, '').slice(0, 12), 16));
  return new Date(now());
}

/** The CloudEvents attributes of `message` (id = message id, type = pattern, time = `occurredAt()`). */
export function cloudEventOf(
  message: { messageId: string; pattern: string },
  options: OutboxCloudEventsOptions,
): CloudEventAttributes {
  return {
    specversion: '1.0',
    id: message.messageId,
    type: message.pattern,
    source: options.source,
    time: occurredAt(message.messageId).toISOString(),
    datacontenttype: 'application/json',
  };
}

/**
 * The attributes as headers named `prefix` + attribute (`ce-id`, `ce_id`, or `id` with an empty prefix), the
 * content type as `content-type` (or left out with `contentType: false`, when the transport has a field for it).
 */
export function cloudEventHeaders(
  attributes: CloudEventAttributes,
  prefix: string,
  { contentType = true }: { contentType?: boolean } = {},
): Record<string, string> {
  const { datacontenttype, ...context } = attributes;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(context)) headers[`${prefix}${name}`] = value;
  if (contentType) headers['content-type'] = datacontenttype;
  return headers;
}
