import { HttpException } from '@nestjs/common';

/** An RFC 9457 problem details body, as the console's API answers errors. */
export interface ConsoleProblemDetails {
  type: string;
  title: string;
  status: number;
  detail: string;
}

/** Prefix of the problem types of the console's API: stable URNs, described in docs/console.md. */
const TYPE_BASE = 'urn:nestjs-outbox:console:';

/** An error the console answers as `application/problem+json` with `status`. */
export class ConsoleProblem extends HttpException {
  constructor(status: number, title: string, detail: string, anchor: string) {
    super({ type: `${TYPE_BASE}${anchor}`, title, status, detail } satisfies ConsoleProblemDetails, status);
  }
}

/** 400: a bad filter, cursor, limit or body. */
export const badRequest = (detail: string) => new ConsoleProblem(400, 'Bad request', detail, 'bad-request');

/** 403: a state-changing call that could come from another site. */
export const crossSite = (detail: string) =>
  new ConsoleProblem(403, 'Cross-site request refused', detail, 'cross-site-protection');

/** 404: no message with this id. */
export const notFound = (detail: string) => new ConsoleProblem(404, 'Not found', detail, 'not-found');

/** 404: no outbox of the app has this DataSource name. */
export const unknownOutbox = (detail: string) => new ConsoleProblem(404, 'Unknown outbox', detail, 'unknown-outbox');
/** 415: a state-changing call whose body is not JSON. */
export const unsupportedMediaType = (detail: string) =>
  new ConsoleProblem(415, 'Unsupported media type', detail, 'cross-site-protection');
