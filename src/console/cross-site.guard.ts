import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { CONSOLE_CSRF_HEADER } from './console.constants';
import { crossSite, unsupportedMediaType } from './console-problem';

type Headers = Record<string, string | string[] | undefined>;

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * Refuses a state-changing console call that another site could have made in the operator's browser (with the
 * operator's cookies or basic-auth credentials): it must carry `X-Outbox-Console: 1` (a custom header, which a
 * cross-site page can only send after a CORS preflight the console never answers), must not be marked
 * `Sec-Fetch-Site: cross-site`, its `Origin` (when sent) must name the host it was sent to, and its body must be
 * JSON. Answers 403 (415 for the content type) as problem+json.
 */
@Injectable()
export class CrossSiteGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const headers = (context.switchToHttp().getRequest<{ headers: Headers }>().headers ?? {}) as Headers;
    if (header(headers, CONSOLE_CSRF_HEADER) !== '1') {
      throw crossSite(
        `A state-changing console call must carry the header X-Outbox-Console: 1 (the console page sends it).`,
      );
    }
    if (header(headers, 'sec-fetch-site') === 'cross-site') {
      throw crossSite(
        'The browser marked this call as cross-site (Sec-Fetch-Site: cross-site): use the console page itself.',
      );
    }
    const origin = header(headers, 'origin');
    if (origin !== undefined && !sameHost(origin, header(headers, 'host'))) {
      throw crossSite(`The call's Origin does not match the host it was sent to: use the console page itself.`);
    }
    const type = header(headers, 'content-type') ?? '';
    if (!/^application\/json\s*(;|$)/i.test(type)) {
      throw unsupportedMediaType('A state-changing console call takes a JSON body (Content-Type: application/json).');
    }
    return true;
  }
}

function sameHost(origin: string, host: string | undefined): boolean {
  if (!host || origin === 'null') return false;
  try {
    return new URL(origin).host.toLowerCase() === host.toLowerCase();
  } catch {
    return false;
  }
}
