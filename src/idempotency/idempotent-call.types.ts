import type { IdempotentOptions, ResolvedIdempotencyDefaults } from './idempotency.options';

/** The options of one handler: module defaults ← class ← method. */
export type ResolvedIdempotentOptions = Omit<ResolvedIdempotencyDefaults, 'manualAck'> &
  Pick<IdempotentOptions, 'scope' | 'key' | 'fingerprint'> & {
    /** When a consumer's handler runs (`mode`): at delivery, or from its inbox row after the message is acked. */
    mode: 'process' | 'accept-first';
    /** Whether the interceptor settles RabbitMQ messages: as given, else derived from the consumer's `noAck`. */
    manualAck: boolean;
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
