import type { OutboxMessageStatus } from '../schema/outbox-message.entity';
import type { DeadLetterEditAudit } from './dead-letter-edit.types';

/**
 * Times of the dead-letter API: epoch milliseconds (database clock) as a number, a `Date`, or a string (an ISO
 * 8601 date or an integer number of milliseconds, as a query string carries it). Results always use numbers.
 */
export type DeadLetterTime = number | string | Date;

/**
 * Which dead messages a query or an operation applies to. Every field given must match (AND); none given: every
 * dead message. Unknown fields are refused (`OutboxDeadLetterQueryError`), so a typo never widens a requeue or a
 * purge to all dead messages.
 */
export interface DeadLetterFilter {
  /** Only these message ids (at most 1000). */
  messageIds?: string[];
  /** Only this pattern (exact). */
  pattern?: string;
  /** Only this ordering key (exact). */
  key?: string;
  /**
   * Only the rows of this destination (exact): `broker:<token>`, `handler:<name>`, or `*` for the rows of every
   * destination (`''`: written before the destinations migration, or for a message with one destination).
   */
  destination?: string;
  /** Only messages whose last error contains this text (case-insensitive; the stored error is redacted). */
  errorContains?: string;
  /** Only messages that went dead at or after this time. */
  deadSince?: DeadLetterTime;
  /** Only messages that went dead before this time. */
  deadBefore?: DeadLetterTime;
  /** Only messages written at or after this time. */
  createdSince?: DeadLetterTime;
  /** Only messages written before this time. */
  createdBefore?: DeadLetterTime;
  /**
   * Only the messages of this failure group: the `group` of an entry of `OutboxDeadLetters.groups()` (16 hex
   * digits). Read from each matching row's last error, so it combines with the other fields.
   */
  group?: string;
}

/** A page request of `OutboxDeadLetters.page()`: a filter, a page size and where to continue. */
export interface DeadLetterPageQuery extends DeadLetterFilter {
  /** Most messages in the page (1–1000). @default 50 */
  limit?: number;
  /** `nextCursor` of the previous page (same filter); omitted or null for the first page. */
  cursor?: string | null;
}

/**
 * A dead message as a page lists it: everything but its payload and headers. Times are epoch milliseconds. A
 * message is one row per destination, each dead (or not) on its own: a page lists the dead rows, so a message
 * appears once per dead destination.
 */
export interface DeadLetterSummary {
  messageId: string;
  pattern: string;
  key: string | null;
  /**
   * The row's destination: `broker:<token>`, `handler:<name>`, or `''` for every destination of the message (decided
   * when it is published).
   */
  destination: string;
  /** Counted attempts when it went dead. */
  attempts: number;
  createdAt: number;
  /** When it went dead; null when unknown (marked dead by a version before `AddOutboxAttempts1765152000000`). */
  deadAt: number | null;
  /** The last error, redacted of credentials. */
  lastError: string | null;
}

/** One page of dead messages, newest death first. */
export interface DeadLetterPage {
  items: DeadLetterSummary[];
  /** Pass it as `cursor` for the next page; null when this is the last page. */
  nextCursor: string | null;
}

/** One failed publish attempt of a message. */
export interface OutboxAttemptRecord {
  /** The message's attempt number (it starts again at 1 after a requeue). */
  attempt: number;
  /** When the failure was written, epoch milliseconds on the database clock. */
  failedAt: number;
  /** False when the broker could not be reached: such attempts do not count toward `retry.maxAttempts`. */
  counted: boolean;
  /** The error, redacted of credentials. */
  error: string;
  /** Owner token of the publish pass (the claim's fencing token). */
  owner: string;
  /** The publisher instance (`publisher.instanceId`). */
  publisher: string;
}

/** One row of a message: its destination and where its delivery stands. */
export interface OutboxDestinationState {
  destination: string;
  status: OutboxMessageStatus;
  attempts: number;
}

/**
 * One row of a message — one destination — with its payload, headers and attempt history (`OutboxDeadLetters.get()`),
 * and where each of the message's rows stands.
 */
export interface OutboxMessageDetail extends DeadLetterSummary {
  status: OutboxMessageStatus;
  /** Every row of the message (one per destination), in write order. */
  destinations: OutboxDestinationState[];
  /** The payload, as the JSON text that is published. */
  payload: string;
  /** The extra headers, as JSON text of a string map, or null. */
  headers: string | null;
  /** When it is due (a retry's or a delayed message's time). */
  availableAt: number;
  sentAt: number | null;
  /** The newest `retry.historyLimit` failed attempts, oldest first. */
  history: OutboxAttemptRecord[];
  /** On a `replaced` row: the id of the corrected copy that replaced it (`editAndRequeue()`); else null. */
  replacedBy: string | null;
  /** On a corrected copy: the id of the message it replaces (its `x-outbox-replaces` header); else null. */
  replaces: string | null;
  /** The audit of the edit that made this copy, or that replaced this message; null when neither. */
  edit: DeadLetterEditAudit | null;
}

/** What `OutboxDeadLetters.groups()` reads: a filter, and how many groups to return. */
export interface DeadLetterGroupsQuery extends Omit<DeadLetterFilter, 'group'> {
  /** Most groups returned, largest first (1–1000). @default 100 */
  limit?: number;
}

/**
 * Dead messages of one cause: the same error class, the same message once numbers, UUIDs, long ids and quoted
 * values are replaced (`order <n> failed`), and the same first application frame when the stored error has a stack.
 */
export interface DeadLetterGroup {
  /** The group id (16 hex digits, the same in every process): pass it as `{ group }` to page, count, requeue, purge. */
  group: string;
  /** The error class the stored errors name, or `''` when they name none. */
  errorClass: string;
  /** The normalised message: `<n>` a number, `<uuid>`, `<id>` a long id, `<str>` a quoted value. */
  message: string;
  /** The first stack frame outside `node_modules` and Node's internals; null when the errors have no stack. */
  frame: string | null;
  /** Dead rows of the group. */
  count: number;
  /** Earliest and latest death in the group, epoch milliseconds; null when unknown (rows dead before attempts). */
  firstSeen: number | null;
  lastSeen: number | null;
  /** The patterns of its messages, most frequent first (at most 10). */
  patterns: string[];
  /** The last error of its newest message, redacted of credentials: what the group looks like unnormalised. */
  example: string | null;
}

/** What `OutboxDeadLetters.groups()` returns. */
export interface DeadLetterGroups {
  /** The groups, largest first (ties: latest death first). */
  groups: DeadLetterGroup[];
  /** Dead rows read to group them. */
  scanned: number;
  /**
   * False when more dead rows match than one call reads (`MAX_GROUP_SCAN`, 100 000, newest first): the counts
   * then cover the newest `scanned` rows only. Narrow the filter (e.g. `deadSince`) for exact counts.
   */
  complete: boolean;
}
