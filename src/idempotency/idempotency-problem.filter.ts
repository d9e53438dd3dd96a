import { ArgumentsHost, Catch, ExceptionFilter } from '@nestjs/common';
import { IdempotencyProblemException } from './idempotency.problems';

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
