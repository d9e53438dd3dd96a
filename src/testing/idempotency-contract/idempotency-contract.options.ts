import type { INestApplication } from '@nestjs/common';

/** The checks of `checkIdempotencyContract()`, in the order they run. */
export const IDEMPOTENCY_CONTRACT_CHECKS = [
  'missing-key',
  'replay',
  'reordered-body',
  'mismatch',
  'concurrent-duplicates',
  'rollback-frees-key',
  'replayed-failure',
] as const;

/** The name of one check. */
export type IdempotencyContractCheck = (typeof IDEMPOTENCY_CONTRACT_CHECKS)[number];

/** A request of the kit, besides its key: the body and extra headers. */
export interface IdempotencyContractRequest {
  /** JSON body. */
  body?: unknown;
  /** Extra headers (authentication, tenant, …) on top of `headers`. */
  headers?: Record<string, string>;
}

/** How to make the route's handler fail inside its transaction, for the `rollback-frees-key` check. */
export type IdempotencyContractFailure =
  | {
      /**
       * Arms a failure of the route's NEXT handler run, then resolves: that run must throw inside the handler's
       * transaction (an `Error`, a 5xx — anything but a final 4xx, which `replayErrors` would keep), best after
       * writing its effect, so the check proves the effect rolls back; the runs after it succeed again. The kit calls
       * it once, right before its request. For example a flag your test sets on a provider, or a TypeORM subscriber
       * that throws once after the effect's INSERT.
       */
      failNext: () => unknown | Promise<unknown>;
    }
  | {
      /**
       * A request the handler fails on, inside its transaction, with anything but a final 4xx (a 5xx, a 409 of your
       * own…), every time. The kit sends it with a key, then sends a valid request with the SAME key: it must run
       * (not be answered 422), since the failure left no record.
       */
      failingRequest: () => IdempotencyContractRequest;
    };

/** Options of `checkIdempotencyContract()`: the app, the route and how to observe its effect. */
export interface IdempotencyContractOptions {
  /**
   * The app: an `INestApplication` (Express or Fastify; one that is not listening yet is started with
   * `listen(0, '127.0.0.1')`, and closing it stays yours), or the base URL of a running server.
   */
  app: INestApplication | string;
  /**
   * HTTP method of the route.
   * @default 'POST'
   */
  method?: 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Path of the route, e.g. '/payments'. */
  path: string;
  /**
   * A valid request for a NEW operation, called once per operation: make each call differ where the route has
   * uniqueness rules (a fresh e-mail, reference …). The kit sends it with its own keys. The `reordered-body` check
   * needs a JSON object with at least two properties at some level.
   */
  request: () => IdempotencyContractRequest;
  /** Headers sent with every request (authentication, tenant, …). */
  headers?: Record<string, string>;
  /**
   * The key header of the route.
   * @default 'Idempotency-Key'
   */
  header?: string;
  /**
   * Counts the route's effect — rows in its table, calls to a fake payment provider — as the database commits them.
   * Read before and after each step: a first request must add exactly one, a replay, a mismatch or a failure none,
   * and concurrent duplicates exactly one together.
   */
  effects: () => number | Promise<number>;
  /** How to make the handler fail once (`rollback-frees-key`); without it that check is skipped. */
  failure?: IdempotencyContractFailure;
  /**
   * A request the handler answers with a final error (a 4xx it throws as `HttpException`, e.g. a declined payment),
   * for `replayed-failure`: a retry must get the same status and body, marked `Idempotent-Replayed: true`, without a
   * second run. Without it that check is skipped.
   */
  finalFailure?: () => IdempotencyContractRequest;
  /**
   * Concurrent duplicates sent by `concurrent-duplicates`.
   * @default 8
   */
  concurrency?: number;
  /**
   * Checks to leave out (e.g. 'missing-key' for a route with `required: false`).
   * @default []
   */
  skip?: IdempotencyContractCheck[];
}

/** The outcome of one check. */
export interface IdempotencyContractCheckResult {
  check: IdempotencyContractCheck;
  /** What the check proves, in a sentence. */
  title: string;
  status: 'passed' | 'failed' | 'skipped';
  /** Why it failed or was skipped: what was expected, what came, and the likely cause. */
  message?: string;
}

/** What `checkIdempotencyContract()` resolves with. */
export interface IdempotencyContractReport {
  /** 'POST /payments'. */
  route: string;
  /** True when no check failed. */
  passed: boolean;
  results: IdempotencyContractCheckResult[];
}
