import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import {
  OutboxEditDisabledError,
  OutboxInvalidMessageError,
  OutboxMessageNotFoundError,
  OutboxNotDeadError,
} from '../errors';
import { describeError } from '../util/describe-error';
import type { ConsoleProblemDetails } from './console-problem';

const TITLES: Record<number, string> = { 400: 'Bad request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not found' };

/**
 * Answers every error of a console route as RFC 9457 `application/problem+json`: the console's own problems as
 * built, a guard's 401/403 and Nest's other HTTP errors with their status, a dead-letter query mistake
 * (`OutboxDeadLetterQueryError` and its parent `OutboxInvalidMessageError`, a bad edit) as 400, a message that is not
 * dead (any more) as 409, an unknown message as 404, an edit where editing is off as 403, anything else as 500 with a
 * redacted, generic detail (the error itself is logged, redacted).
 */
@Catch()
export class ConsoleProblemFilter implements ExceptionFilter {
  private readonly logger = new Logger('OutboxConsole');

  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(error: unknown, host: ArgumentsHost): void {
    const problem = this.toProblem(error);
    const { httpAdapter } = this.adapterHost;
    const response = host.switchToHttp().getResponse();
    httpAdapter.setHeader(response, 'Content-Type', 'application/problem+json');
    httpAdapter.setHeader(response, 'Cache-Control', 'no-store');
    httpAdapter.reply(response, JSON.stringify(problem), problem.status);
  }

  private toProblem(error: unknown): ConsoleProblemDetails {
    if (error instanceof OutboxNotDeadError) {
      return {
        type: 'urn:nestjs-outbox:console:not-dead',
        title: 'Not a dead letter',
        status: 409,
        detail: error.message,
      };
    }
    if (error instanceof OutboxMessageNotFoundError) {
      return { type: 'urn:nestjs-outbox:console:not-found', title: 'Not found', status: 404, detail: error.message };
    }
    if (error instanceof OutboxEditDisabledError) {
      return {
        type: 'urn:nestjs-outbox:console:edit-disabled',
        title: 'Editing is off',
        status: 403,
        detail: error.message,
      };
    }
    if (error instanceof OutboxInvalidMessageError) {
      return {
        type: 'urn:nestjs-outbox:console:bad-request',
        title: 'Bad request',
        status: 400,
        detail: error.message,
      };
    }
    if (error instanceof HttpException) {
      const status = error.getStatus();
      const body = error.getResponse();
      if (typeof body === 'object' && body !== null && 'type' in body && 'detail' in body)
        return body as ConsoleProblemDetails;
      const message = typeof body === 'object' && body !== null ? (body as { message?: unknown }).message : body;
      return {
        type: 'about:blank',
        title: TITLES[status] ?? error.name,
        status,
        detail: Array.isArray(message) ? message.join('; ') : String(message ?? error.message),
      };
    }
    this.logger.error(`Console request failed: ${describeError(error)}`);
    return {
      type: 'about:blank',
      title: 'Internal Server Error',
      status: 500,
      detail: 'The console could not answer; see the server log.',
    };
  }
}
