import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus } from '@nestjs/common';
import { MAX_JSON_DEPTH } from './fingerprint';

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

/**
 * Sends `IdempotencyProblemException`s as `application/problem+json` (RFC 9457), with `Retry-After` on a 409 (key in flight) and a 503 (database unreachable), on
 * Express and Fastify alike. (Nest's default filter would rewrite the content type to `application/json`.)
 * `@Idempotent()` applies it to the handlers it guards; a filter of your own on the same handler takes precedence.
 */
@Catch(IdempotencyProblemException)
export class IdempotencyProblemFilter implements ExceptionFilter<IdempotencyProblemException> {
  catch(exception: IdempotencyProblemException, host: ArgumentsHost): void {
    const response = host.switchToHttp().getResponse();
    const set = (name: string, value: string) =>
      typeof response.header === 'function' ? response.header(name, value) : response.setHeader(name, value);
    set('Content-Type', 'application/problem+json; charset=utf-8');
    if (exception.retryAfter !== undefined) set('Retry-After', String(exception.retryAfter));
    response.status(exception.getStatus()).send(JSON.stringify(exception.problem));
  }
}

/**
 * The warnings `@Idempotent()` logs once per handler (`consumer` is 'Controller.method'): a setup that weakens the
 * guarantee without failing a request. Imported as `warnings`, e.g. `warnings.sharedKeys(consumer)`.
 */

/** Remembers what was warned about, so each warning is logged once per handler (`warnOnce`). */
export class FirstTimes {
  private readonly seen = new Set<string>();

  /** True the first time it is asked about `about`, false ever after. */
  first(about: string): boolean {
    if (this.seen.has(about)) return false;
    this.seen.add(about);
    return true;
  }
}

/** An HTTP route ran without a principal and without a `scope` option: its keys are shared by every client. */
export function sharedKeys(consumer: string): string {
  return (
    `${consumer} ran without a principal (no request.user with an id or sub) and without a ` +
    '`scope` option, so its idempotency keys are shared by every client: a client that sends another ' +
    "client's key and body receives that client's stored response. Put the authentication guard before " +
    'it, or pass @Idempotent({ scope: (context) => … }) (e.g. a tenant or API-key id).'
  );
}

/** An HTTP handler returned a stream: committed without a record. */
export function streamNotStored(consumer: string): string {
  return (
    `${consumer} returned a stream, which cannot be stored or replayed: its effect was committed without an ` +
    'idempotency record, so a retry runs it again. Return a JSON body from idempotent handlers.'
  );
}

/** A message without an id: handled in a transaction without a record. */
export function messageWithoutId(consumer: string): string {
  return (
    `${consumer} received a message without an id: it ran in a transaction without an idempotency ` +
    "record, so a redelivery runs it again. Messages from this library's outbox carry one (TCP/Redis " +
    'consumers need OutboxEnvelopeDeserializer); for other producers pass ' +
    '@Idempotent({ key: (data, context) => … }).'
  );
}

/** A message's data nested too deeply to fingerprint: deduplicated by message id only. */
export function nestedData(consumer: string): string {
  return (
    `${consumer} received data nested more than ${MAX_JSON_DEPTH} levels deep: ` +
    'it is deduplicated by message id only.'
  );
}
