/**
 * The types of `OutboxDeadLetters.editAndRequeue()`. Not exported by name: reach them as
 * `Parameters<OutboxDeadLetters['editAndRequeue']>[1]` and `Awaited<ReturnType<OutboxDeadLetters['editAndRequeue']>>`.
 */

/**
 * What an edit changes, and who makes it and why. Only the payload and the headers can be edited: the pattern, the
 * ordering key and the destination stay the original's (a message of another pattern or key is a new message: emit
 * it). At least one of `payload` and `headers` must change something.
 */
export interface DeadLetterEdit {
  /** The corrected payload: any JSON value, serialized as `emit()` serializes one. Absent: the original's. */
  payload?: unknown;
  /**
   * The corrected headers, as the whole map (string values; `{}` or null for none). Absent: the original's. The
   * headers the library writes are its own: the copy gets `x-outbox-replaces`, and keeps a consumer inbox row's
   * `x-outbox-inbox-scope` / `x-outbox-inbox-fingerprint`; passing one back with its stored value (as `get()` read
   * it) is fine, setting it or `x-message-id` otherwise is refused.
   */
  headers?: Record<string, string> | null;
  /** Why, kept in the audit (at most 1000 characters). */
  reason?: string;
  /** Who, kept in the audit: the operator's or service's id (at most 255 characters). The console passes its guard's principal. */
  actor?: string;
  /** Only the dead row of this destination. Absent: every dead row of the message (one copy row each). */
  destination?: string;
}

/** One changed value of an edit, in the audit. Values are JSON text, redacted of credentials; null: absent. */
export interface DeadLetterEditChange {
  /** `payload` or `headers`. */
  field: 'payload' | 'headers';
  /** Where in it, as a JSON Pointer (`''`: the whole value, `/customer/email`, `/items/0`). */
  path: string;
  before: string | null;
  after: string | null;
}

/** The audit of one edit, kept on the replaced original (and shown by `get()` of the original and of the copy). */
export interface DeadLetterEditAudit {
  /** The original's id. */
  replaces: string;
  /** The corrected copy's id. */
  replacedBy: string;
  /** The destinations of the rows replaced. */
  destinations: string[];
  /** When, epoch milliseconds on the database clock. */
  editedAt: number;
  actor: string | null;
  reason: string | null;
  /** What changed, at most 100 entries (`truncated` beyond). */
  changes: DeadLetterEditChange[];
  truncated: boolean;
}

/** What `editAndRequeue()` resolves with: the copy's id, pending and due now, and the audit written. */
export interface DeadLetterEditResult {
  messageId: string;
  replacedBy: string;
  audit: DeadLetterEditAudit;
}
