import { redactSecrets } from './redact-secrets';

/** Nested errors followed to find the first useful message (amqp-connection-manager `{ err, url }`, NATS, causes). */
const MAX_DEPTH = 4;

/**
 * One line of text for anything thrown or rejected, with credentials redacted (`redactSecrets()`): the message of an
 * `Error`, a string as is, the `err` and `url` of amqp-connection-manager's `{ err, url }`, the chained error of a
 * NATS error, else JSON. Use it for every log line, stored error, event and response that carries an error.
 */
export function describeError(error: unknown): string {
  return redactSecrets(text(error, false, 0));
}

/**
 * Like `describeError()`, prefixed with the error's class name (`OutboxPublishTimeoutError: …`): the form stored
 * in `last_error` and sent in the `retry` and `dead` events.
 */
export function describeFailure(error: unknown): string {
  return redactSecrets(text(error, true, 0));
}

function text(error: unknown, withName: boolean, depth: number): string {
  if (error instanceof Error) {
    const message = error.message || (error as { code?: unknown }).code?.toString() || '';
    const base = withName ? `${error.name}: ${message}` : message;
    const inner = nested(error);
    if (inner !== undefined && depth < MAX_DEPTH) {
      const detail = text(inner, false, depth + 1);
      if (detail && !base.includes(detail)) return `${base} (${detail})`;
    }
    return base;
  }
  if (typeof error === 'string') return error;
  if (error === null || error === undefined) return String(error);
  if (typeof error === 'object') {
    const { err, url } = error as { err?: unknown; url?: unknown };
    if (err !== undefined && depth < MAX_DEPTH) {
      const inner = text(err, withName, depth + 1);
      return typeof url === 'string' ? `${inner} (${url})` : inner;
    }
    try {
      return JSON.stringify(error) ?? String(error);
    } catch {
      return String(error);
    }
  }
  return String(error);
}

function nested(error: Error): unknown {
  const { chainedError, cause } = error as { chainedError?: unknown; cause?: unknown };
  return chainedError ?? cause;
}
