import { HttpException, HttpStatus } from '@nestjs/common';

/** RFC 9457 problem details, as sent for the idempotency errors. */
export interface IdempotencyProblemDetails {
  type: string;
  title: string;
  status: number;
  detail: string;
  /**
   * A stable machine-readable reason: `idempotency-key-missing`, `idempotency-key-invalid`, `idempotency-key-in-use`,
   * `idempotency-key-reused`, `body-nested-too-deeply`, `database-unavailable`, `database-busy`.
   */
  code: string;
}

/**
 * An idempotency error, answered as `application/problem+json` (RFC 9457) by `IdempotencyProblemFilter`, which
 * `@Idempotent()` applies to its handlers. `retryAfter` (seconds) becomes the `Retry-After` header.
 */
export class IdempotencyProblemException extends HttpException {
  constructor(
    readonly problem: IdempotencyProblemDetails,
    readonly retryAfter?: number,
  ) {
    super(problem, problem.status);
  }
}

const TITLES: Record<number, string> = {
  [HttpStatus.BAD_REQUEST]: 'Bad Request',
  [HttpStatus.CONFLICT]: 'Conflict',
  [HttpStatus.UNPROCESSABLE_ENTITY]: 'Unprocessable Content',
  [HttpStatus.SERVICE_UNAVAILABLE]: 'Service Unavailable',
};

function problem(status: number, code: string, detail: string, retryAfter?: number): IdempotencyProblemException {
  return new IdempotencyProblemException(
    { type: 'about:blank', title: TITLES[status], status, detail, code },
    retryAfter,
  );
}

/** 400: the endpoint requires a key and the request has none. */
export function missingKeyProblem(header: string): IdempotencyProblemException {
  return problem(
    HttpStatus.BAD_REQUEST,
    'idempotency-key-missing',
    `This endpoint requires an ${header} header. ` +
      `Send a unique value per logical operation (for example a UUID) and reuse it, with the same body, ` +
      `when you retry that operation.`,
  );
}

/** 400: an empty key, or one longer than `max` characters. */
export function invalidKeyProblem(header: string, max: number, length: number): IdempotencyProblemException {
  return problem(
    HttpStatus.BAD_REQUEST,
    'idempotency-key-invalid',
    `The ${header} header must hold 1 to ${max} characters; this one has ${length}. ` +
      `Send a unique value per logical operation, for example a UUID.`,
  );
}

/** 400: a quoted key (RFC 8941 sf-string) that does not parse; `reason` says what was wrong and how to fix it. */
export function malformedKeyProblem(header: string, reason: string): IdempotencyProblemException {
  return problem(
    HttpStatus.BAD_REQUEST,
    'idempotency-key-invalid',
    `The ${header} header is not a valid key: ${reason}. ` +
      `Send the key bare (${header}: 8e03978e-…) or as an RFC 8941 string (${header}: "8e03978e-…").`,
  );
}

/** 409: the same key is being handled right now. */
export function inFlightProblem(header: string, retryAfter: number): IdempotencyProblemException {
  return problem(
    HttpStatus.CONFLICT,
    'idempotency-key-in-use',
    `A request with this ${header} is still being processed. ` +
      `Retry after ${retryAfter} second(s) with the same key and body to get its result.`,
    retryAfter,
  );
}

/** 422: the key was used for a different request. */
export function reusedKeyProblem(header: string): IdempotencyProblemException {
  return problem(
    HttpStatus.UNPROCESSABLE_ENTITY,
    'idempotency-key-reused',
    `This ${header} was already used for a different request (another method, path, query or body). ` +
      `Send a new key for a new operation; reuse a key only to retry the very same request.`,
  );
}

/** 400: the request (body, query or custom fingerprint) is nested deeper than the fingerprint accepts. */
export function nestedTooDeeplyProblem(maxDepth: number): IdempotencyProblemException {
  return problem(
    HttpStatus.BAD_REQUEST,
    'body-nested-too-deeply',
    `The request body is nested too deeply: at most ${maxDepth} levels of arrays and objects are accepted. ` +
      `Send a flatter body.`,
  );
}

/** 503: the database could not be reached, so nothing was applied (or a commit's outcome is unknown: the key tells). */
export function databaseUnavailableProblem(header: string, retryAfter: number): IdempotencyProblemException {
  return problem(
    HttpStatus.SERVICE_UNAVAILABLE,
    'database-unavailable',
    `The database is unreachable right now. Retry after ${retryAfter} second(s) with the same ${header} and body: ` +
      `the request takes effect at most once, and if it already did, the retry answers its stored response.`,
    retryAfter,
  );
}

/**
 * 503: the database answers but is saturated — no pooled connection became free within `connectionTimeout`, or a
 * statement gave up waiting for a lock (`lockTimeout`) or ran past a statement timeout. Nothing was applied.
 */
export function databaseBusyProblem(header: string, retryAfter: number): IdempotencyProblemException {
  return problem(
    HttpStatus.SERVICE_UNAVAILABLE,
    'database-busy',
    `The database is too busy to take this request right now (no connection became free in time, or a lock wait ` +
      `timed out). Retry after ${retryAfter} second(s) with the same ${header} and body: the request takes effect ` +
      `at most once, and if it already did, the retry answers its stored response.`,
    retryAfter,
  );
}
