import type { EntityManager } from 'typeorm';
import type { NewOutboxRow } from '../dialects/outbox-dialect';
import { OutboxDuplicateMessageIdError, OutboxInvalidMessageError } from '../errors';
import { CAUSE_HEADER, MESSAGE_ID_HEADER } from '../outbox.constants';
import { currentTraceHeaders } from '../util/opentelemetry';
import { newMessageId } from './new-message-id';
import { serializeJson } from './serialize-json';

/*
 * What `emit()` and `emitMany()` are given, checked and built into the rows they write (one per message; the
 * service then makes one per destination).
 */

/** Options of one `emit()`. */
export interface EmitOptions {
  /** Write through this manager (its transaction) instead of the ambient one. */
  manager?: EntityManager;
  /** Ordering key: messages with the same key are published in commit order. Up to 255 characters. */
  key?: string;
  /** Extra headers sent with the message (string values). */
  headers?: Record<string, string>;
  /** Publish no earlier than this time. */
  availableAt?: Date;
  /** Publish no earlier than this many milliseconds after the commit's database time. */
  delay?: number;
  /** The message id to use instead of a new UUIDv7 (up to 255 characters, unique in the outbox). */
  messageId?: string;
  /**
   * Never publish the message once this many milliseconds (> 0) have passed after the commit's database time: the
   * publisher then makes it a dead letter (reason `expired`) or drops it (`publisher.onExpired`), and the later
   * messages of its key go on. A broker that supports it gets the time left (RabbitMQ `expiration`, MQTT 5 message
   * expiry interval). Larger than `delay` when both are given. Not with `expiresAt`. @default no expiry
   */
  expiresIn?: number;
  /**
   * Never publish the message from this time on (compared with the database clock); as `expiresIn`, at an absolute
   * time. Later than `availableAt` when both are given. Not with `expiresIn`. @default no expiry
   */
  expiresAt?: Date;
}

/** One event of `emitMany()`. */
export interface EmitManyEvent {
  /** The pattern the consumer's `@EventPattern()` listens to. */
  pattern: string;
  /** The event's data (JSON-serializable). */
  payload: unknown;
  /** The options `emit()` takes, except `manager` (give it once, as `emitMany()`'s second argument). */
  options?: Omit<EmitOptions, 'manager'>;
}

/** Options of one `emitMany()` call. */
export interface EmitManyOptions {
  /** Write through this manager (its transaction) instead of the ambient one. */
  manager?: EntityManager;
}

const MAX_TEXT = 255;

/**
 * The row `emit()` writes for one event, its arguments checked (`OutboxInvalidMessageError` naming the fix): a new
 * UUIDv7 unless `messageId` is given, and the active OpenTelemetry context in its headers when the app traces; with a
 * `cause` (the idempotency record of the emitting call), the cause and its header (`x-outbox-cause`, its key).
 */
export function emitRow(
  pattern: string,
  payload: unknown,
  options: EmitOptions,
  cause?: { scope: string; key: string },
): NewOutboxRow {
  if (typeof pattern !== 'string' || pattern.trim().length === 0 || pattern.length > MAX_TEXT) {
    throw new OutboxInvalidMessageError(
      `emit() needs a pattern: a non-empty string of at most ${MAX_TEXT} characters, the one the consumer's ` +
        `@EventPattern() listens to. Got ${typeof pattern === 'string' ? JSON.stringify(pattern.slice(0, 40)) : typeof pattern}.`,
    );
  }
  if (options === null || typeof options !== 'object') {
    throw new OutboxInvalidMessageError(`emit('${pattern}') options must be an object.`);
  }
  const key = optionalText(pattern, 'key', options.key);
  const messageId = optionalText(pattern, 'messageId', options.messageId) ?? newMessageId();
  let headers: string | null = null;
  if (options.headers !== undefined) {
    const h = options.headers;
    if (typeof h !== 'object' || h === null || Array.isArray(h)) {
      throw new OutboxInvalidMessageError(`emit('${pattern}') option headers must be an object of string values.`);
    }
    for (const [name, value] of Object.entries(h)) {
      if (typeof value !== 'string') {
        throw new OutboxInvalidMessageError(
          `emit('${pattern}') header "${name}" must be a string, got ${typeof value}. Convert it with String().`,
        );
      }
      if (name.toLowerCase() === MESSAGE_ID_HEADER) {
        throw new OutboxInvalidMessageError(
          `emit('${pattern}') header "${name}" is reserved for the message id. Use the messageId option.`,
        );
      }
    }
    if (Object.keys(h).length > 0) headers = serializeJson(h, 'headers');
  }
  const trace = currentTraceHeaders(); // the active OpenTelemetry context, when the app traces
  if (trace || cause) {
    const added = cause ? { ...trace, [CAUSE_HEADER]: cause.key } : trace;
    headers = serializeJson({ ...added, ...options.headers }, 'headers');
  }
  let availableAt: number | undefined;
  if (options.availableAt !== undefined) {
    if (!(options.availableAt instanceof Date) || Number.isNaN(options.availableAt.getTime())) {
      throw new OutboxInvalidMessageError(`emit('${pattern}') option availableAt must be a valid Date.`);
    }
    availableAt = options.availableAt.getTime();
  }
  if (
    options.delay !== undefined &&
    (typeof options.delay !== 'number' || !Number.isFinite(options.delay) || options.delay < 0)
  ) {
    throw new OutboxInvalidMessageError(`emit('${pattern}') option delay must be a number of milliseconds >= 0.`);
  }
  const expiry = checkedExpiry(pattern, options, availableAt);
  return {
    messageId,
    pattern,
    payload: serializeJson(payload, 'payload'),
    headers,
    key,
    availableAt,
    delay: options.delay,
    ...expiry,
    ...(cause ? { cause } : {}),
  };
}

/** The expiry of `emit()`'s options (`expiresIn` or `expiresAt`), checked against each other and the due time. */
function checkedExpiry(
  pattern: string,
  options: EmitOptions,
  availableAt: number | undefined,
): { expiresAt?: number; expiresIn?: number } {
  const { expiresIn, expiresAt } = options;
  if (expiresIn !== undefined && expiresAt !== undefined) {
    throw new OutboxInvalidMessageError(
      `emit('${pattern}') options expiresIn and expiresAt are both given: give one (expiresIn counts milliseconds ` +
        'from the commit, expiresAt is a Date).',
    );
  }
  if (expiresIn !== undefined) {
    if (typeof expiresIn !== 'number' || !Number.isFinite(expiresIn) || expiresIn <= 0) {
      throw new OutboxInvalidMessageError(
        `emit('${pattern}') option expiresIn must be a number of milliseconds > 0, got ${String(expiresIn)}. ` +
          'Leave it out for a message that never expires.',
      );
    }
    if (options.delay !== undefined && expiresIn <= options.delay) {
      throw new OutboxInvalidMessageError(
        `emit('${pattern}') option expiresIn (${expiresIn} ms) must be larger than delay (${options.delay} ms): the ` +
          'message would expire before it is due. Both count from the commit; raise expiresIn.',
      );
    }
    return { expiresIn };
  }
  if (expiresAt !== undefined) {
    if (!(expiresAt instanceof Date) || Number.isNaN(expiresAt.getTime())) {
      throw new OutboxInvalidMessageError(
        `emit('${pattern}') option expiresAt must be a valid Date. Use expiresIn for a number of milliseconds.`,
      );
    }
    if (availableAt !== undefined && expiresAt.getTime() <= availableAt) {
      throw new OutboxInvalidMessageError(
        `emit('${pattern}') option expiresAt (${expiresAt.toISOString()}) must be later than availableAt ` +
          `(${new Date(availableAt).toISOString()}): the message would expire before it is due.`,
      );
    }
    return { expiresAt: expiresAt.getTime() };
  }
  return {};
}

/**
 * The rows `emitMany()` writes, in the order of `events`: every event checked (errors name the event) and no message
 * id given twice, before anything is written.
 */
export function emitManyRows(
  events: readonly EmitManyEvent[],
  options: EmitManyOptions,
  cause?: { scope: string; key: string },
): NewOutboxRow[] {
  if (!Array.isArray(events)) {
    throw new OutboxInvalidMessageError(
      `emitMany() needs an array of { pattern, payload, options? }, got ${events === null ? 'null' : typeof events}.`,
    );
  }
  if (options === null || typeof options !== 'object') {
    throw new OutboxInvalidMessageError('emitMany() options must be an object ({ manager? }).');
  }
  const rows = events.map((event, i) => emitManyRow(event, i, cause));
  const ids = new Set<string>();
  for (const row of rows) {
    if (ids.has(row.messageId)) {
      throw new OutboxDuplicateMessageIdError(
        `emitMany(): the message id ${JSON.stringify(row.messageId)} is given to more than one event (message ` +
          'ids are unique; consumers deduplicate by them). Leave messageId out to get new UUIDv7s, or derive ' +
          'each from something unique to its event.',
        row.messageId,
      );
    }
    ids.add(row.messageId);
  }
  return rows;
}

/** The fields of an `emitMany()` event; any other is refused (a `key` beside `pattern` would be silently lost). */
const EMIT_MANY_EVENT_FIELDS = new Set(['pattern', 'payload', 'options']);
/** The names of `emit()`'s options, to tell a misplaced option from a typo. */
const EMIT_OPTION_NAMES = new Set(['key', 'headers', 'availableAt', 'delay', 'messageId', 'expiresIn', 'expiresAt']);

/** `emitRow()` of the `index`-th event of `emitMany()`, errors naming the event. */
function emitManyRow(event: EmitManyEvent, index: number, cause?: { scope: string; key: string }): NewOutboxRow {
  if (event === null || typeof event !== 'object' || Array.isArray(event)) {
    throw new OutboxInvalidMessageError(
      `emitMany() event #${index} must be an object { pattern, payload, options? }, got ${event === null ? 'null' : typeof event}.`,
    );
  }
  const unknown = Object.keys(event).filter((name) => !EMIT_MANY_EVENT_FIELDS.has(name));
  if (unknown.length > 0) {
    const options = unknown.filter((name) => EMIT_OPTION_NAMES.has(name));
    throw new OutboxInvalidMessageError(
      `emitMany() event #${index} has the unknown field${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}: an event ` +
        'is { pattern, payload, options? }' +
        (options.length > 0
          ? `; ${options.join(', ')} belong${options.length > 1 ? '' : 's'} in its options: { pattern, payload, options: { ${options.join(', ')} } }.`
          : '.'),
    );
  }
  const options = event.options ?? {};
  if (options !== null && typeof options === 'object' && 'manager' in options) {
    throw new OutboxInvalidMessageError(
      `emitMany() event #${index} has a manager option: give the manager once, as emitMany(events, { manager }).`,
    );
  }
  try {
    return emitRow(event.pattern, event.payload, options, cause);
  } catch (error) {
    if (error instanceof OutboxInvalidMessageError) error.message = `emitMany() event #${index}: ${error.message}`;
    throw error;
  }
}

function optionalText(pattern: string, name: string, value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_TEXT) {
    throw new OutboxInvalidMessageError(
      `emit('${pattern}') option ${name} must be a non-empty string of at most ${MAX_TEXT} characters.`,
    );
  }
  return value;
}
