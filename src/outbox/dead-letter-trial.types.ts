/*
 * The dry run of dead letters (`OutboxDeadLetters.dryRun()`): what it reports, and the small interface a kind of row
 * plugs into to be tried (the relay's in-process handlers and brokers today; other kinds of rows, such as a
 * consumer's stored messages, later). Types only.
 */

/** What a dry run can ask of `OutboxDeadLetters.dryRun()` besides the selection. */
export interface DeadLetterDryRunOptions {
  /**
   * Most dead rows tried (1–1000), newest death first; the result's `complete` is false when the selection has
   * more. Each in-process handler run takes a transaction of its own, one after the other.
   * @default 100
   */
  limit?: number;
}

/** Why a destination (or a whole row) would fail again: the error's class and its message, redacted, no stack. */
export interface DeadLetterTrialError {
  /** The class of what was thrown (`TypeError`, `QueryFailedError`, …), or `_OTHER` for a non-`Error`. */
  errorClass: string;
  /** Its message (with nested causes), redacted of credentials. */
  message: string;
}

/** What a broker would be sent for a row: built as the relay builds it, stopped before the send. */
export interface DeadLetterPacket {
  /** The client's transport (`rmq`, `nats`, `mqtt`, `kafka`, `redis`, `tcp`). */
  transport: string;
  /** The pattern it would be emitted with. */
  pattern: string;
  /** Names of the headers it would carry (the message id's included), in the transport's own form. */
  headers: string[];
  /** Size of the body as the client's serializer encodes it, in bytes (headers not counted). */
  bytes: number;
  /** Whether the client reports itself connected now; absent when it reports no status. Nothing was sent. */
  connected?: boolean;
}

/** The trial of one destination of a row. */
export interface DeadLetterTrialTarget {
  /**
   * `handler` (an `@OnOutboxEvent()` method), `consumer` (a broker consumer under `@Idempotent({ retry })`, on its
   * inbox row), `broker` (a `ClientProxy`), or another kind's name.
   */
  kind: string;
  /** The destination: `handler:<name>`, `consumer:<name>` or `broker:<token>`. */
  destination: string;
  /** True when it would succeed now. */
  ok: boolean;
  /**
   * For a handler or consumer that would succeed: `ran` (it ran to its end; its transaction was rolled back) or `skipped` (its
   * deduplication record shows an earlier attempt applied it: a requeue skips it too, so it did not run).
   */
  outcome?: 'ran' | 'skipped';
  /** For a broker: what it would be sent. */
  packet?: DeadLetterPacket;
  /** Why it would fail, when `ok` is false. */
  error?: DeadLetterTrialError;
}

/** The trial of one dead row (one message's row for one destination, or for all of them). */
export interface DeadLetterTrialResult {
  messageId: string;
  pattern: string;
  key: string | null;
  /** The row's destination (`''`: every destination of the message). */
  destination: string;
  /** Counted attempts when it went dead (unchanged: nothing is written). */
  attempts: number;
  /** True when every destination of the row would succeed now: requeueing it should deliver it. */
  ok: boolean;
  /** Why the row fails before any destination is tried (no destination left, a payload that is not JSON). */
  error?: DeadLetterTrialError;
  /** One entry per destination tried. */
  targets: DeadLetterTrialTarget[];
}

/** What `OutboxDeadLetters.dryRun()` returns. Nothing was committed nor sent. */
export interface DeadLetterDryRun {
  /** The rows tried, newest death first. */
  results: DeadLetterTrialResult[];
  /** Rows tried, and how many of them would succeed or fail. */
  tried: number;
  ok: number;
  failed: number;
  /** False when the selection has more dead rows than `limit`: only the newest `limit` were tried. */
  complete: boolean;
}

/** A dead row as a trier gets it. */
export interface DeadLetterTrialRow {
  seq: string;
  messageId: string;
  pattern: string;
  key: string | null;
  destination: string;
  /** The payload as stored (JSON text). */
  payload: string;
  /** The headers as stored (JSON text of a string map), or null. */
  headers: string | null;
  attempts: number;
  /** When it expires (epoch ms, database clock as stored), or null: never. */
  expiresAt: number | null;
}

/**
 * Tries the dead rows of some destinations without committing or sending anything. The relay registers one for its
 * destinations (`''`, `broker:`, `handler:`); another kind of row registers its own (the latest registered that
 * `accepts()` a row tries it).
 */
export interface DeadLetterTrier {
  /** True when this trier tries rows of `destination` (the row's destination column). */
  accepts(destination: string): boolean;
  /**
   * Tries `row`: resolves with one entry per destination; rejects when the row fails before any destination is
   * tried (reported as the row's `error`). Must never commit, send, or change the row.
   */
  tryRow(row: DeadLetterTrialRow): Promise<DeadLetterTrialTarget[]>;
}
