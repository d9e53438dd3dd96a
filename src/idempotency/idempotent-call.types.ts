import type { IdempotentOptions, ResolvedIdempotencyDefaults } from './idempotency.options';

/** The options of one handler: module defaults ← class ← method. */
export type ResolvedIdempotentOptions = ResolvedIdempotencyDefaults &
  Pick<IdempotentOptions, 'scope' | 'key' | 'fingerprint'> & {
    /** Lower-case header name. */
    headerKey: string;
    /** 'Controller.method', the default scope of message handlers. */
    consumer: string;
    /** The DataSource the key is recorded in (`'default'` for the default one). */
    dataSource: string;
  };

/** The response that is stored and replayed. */
export interface StoredResponse {
  status: number | null;
  /** JSON text, or null for "no body". */
  body: string | null;
  /** JSON text of the replayed headers, or null. */
  headers: string | null;
}

/** What identifies one idempotent call. */
export interface IdempotentCall {
  scope: string;
  key: string;
  fingerprint: string;
  options: ResolvedIdempotentOptions;
}

/** Runs the guarded handler (through Nest's `next.handle()`), resolving with its last value. */
export type HandlerBody = () => Promise<unknown>;
