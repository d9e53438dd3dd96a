import type { OutboxMessageDetail } from '../outbox/dead-letter.model';
import { redactSecrets } from '../util/redact-secrets';

/** One message as the console shows it: the stored detail with every text redacted of credentials. */
export interface ConsoleMessageView extends Omit<OutboxMessageDetail, 'headers'> {
  /** The extra headers as an object (values redacted), or null. */
  headers: Record<string, unknown> | null;
}

/**
 * Redacts what `OutboxDeadLetters.get()` returns for display: URL passwords and the values of secret-named fields
 * (`password`, `token`, `authorization`, …) in the payload, the headers, the last error and each attempt's error.
 */
export function toMessageView(detail: OutboxMessageDetail): ConsoleMessageView {
  return {
    ...detail,
    payload: redactSecrets(detail.payload),
    headers: detail.headers === null ? null : parseHeaders(redactSecrets(detail.headers)),
    lastError: detail.lastError === null ? null : redactSecrets(detail.lastError),
    history: detail.history.map((attempt) => ({ ...attempt, error: redactSecrets(attempt.error) })),
  };
}

function parseHeaders(text: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed))
      return parsed as Record<string, unknown>;
  } catch {
    // not JSON after all: show it as one value
  }
  return { '(headers)': text };
}
