import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpServer, HttpStatus, Logger } from '@nestjs/common';

/** An RFC 9457 problem details body. */
export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  detail?: string;
  [extension: string]: unknown;
}

/**
 * Answers every HTTP error as `application/problem+json` (RFC 9457): Nest's HTTP exceptions, validation errors,
 * malformed JSON bodies (400, not 500) and the library's idempotency errors (which are problem details already).
 * Anything else is a 500 whose details stay in the log.
 */
@Catch()
export class ProblemDetailsFilter implements ExceptionFilter {
  private readonly logger = new Logger('ProblemDetailsFilter');

  constructor(private readonly http: HttpServer) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const response = host.switchToHttp().getResponse();
    const problem = this.toProblem(exception);
    if (problem.status >= 500) this.logger.error(exception instanceof Error ? exception.stack : String(exception));
    this.http.setHeader(response, 'Content-Type', 'application/problem+json');
    this.http.reply(response, JSON.stringify(problem), problem.status);
  }

  protected toProblem(exception: unknown): ProblemDetails {
    if (exception instanceof HttpException) {
      const status = exception.getStatus();
      const body = exception.getResponse();
      if (isProblem(body)) return { ...body, status };
      const title = statusTitle(status);
      if (typeof body === 'string') return { type: 'about:blank', title, status, detail: body };
      const { message, error: _error, statusCode: _statusCode, ...extensions } = body as Record<string, unknown>;
      let detail = Array.isArray(message)
        ? message.join('; ')
        : typeof message === 'string'
          ? message
          : exception.message;
      // Nest turns body-parser's SyntaxError (malformed JSON) into a plain 400 carrying the parser's message.
      if (status === 400 && typeof message === 'string' && /\bJSON\b/.test(message)) {
        detail = `The request body is not valid JSON (${message}). Send a JSON object with Content-Type: application/json.`;
      }
      return {
        type: 'about:blank',
        title,
        status,
        detail,
        ...(Array.isArray(message) ? { errors: message } : {}),
        ...extensions,
      };
    }
    if (isBodyParserError(exception)) {
      return {
        type: 'about:blank',
        title: statusTitle(exception.status),
        status: exception.status,
        detail: `The request body could not be read (${exception.message}). Send valid JSON with Content-Type: application/json.`,
      };
    }
    return {
      type: 'about:blank',
      title: 'Internal Server Error',
      status: 500,
      detail: 'An unexpected error occurred; see the server log.',
    };
  }
}

function isProblem(body: unknown): body is ProblemDetails {
  return (
    typeof body === 'object' &&
    body !== null &&
    typeof (body as ProblemDetails).type === 'string' &&
    typeof (body as ProblemDetails).title === 'string'
  );
}

/** Errors of the JSON body parser (malformed JSON, too large, …) carry a 4xx `status`. */
function isBodyParserError(error: unknown): error is Error & { status: number } {
  const status = (error as { status?: unknown })?.status;
  return (
    error instanceof Error &&
    typeof status === 'number' &&
    status >= 400 &&
    status < 500 &&
    typeof (error as { type?: unknown }).type === 'string'
  );
}

function statusTitle(status: number): string {
  const name = HttpStatus[status];
  return typeof name === 'string'
    ? name
        .toLowerCase()
        .split('_')
        .map((w) => w[0].toUpperCase() + w.slice(1))
        .join(' ')
    : 'Error';
}
