import { CanActivate, ExecutionContext, ForbiddenException, UnauthorizedException } from '@nestjs/common';
import { timingSafeEqual } from 'node:crypto';

/**
 * Who may open the outbox console of the shop: whoever knows the token, sent as the basic-auth password (any user
 * name — the browser asks for it) or in the `x-console-token` header (scripts). A real app would check its own
 * operators (SSO, roles); the point is that the console is never open to everyone.
 */
export class ConsoleTokenGuard implements CanActivate {
  constructor(private readonly token: string) {}

  canActivate(context: ExecutionContext): boolean {
    const http = context.switchToHttp();
    const headers = http.getRequest<{ headers: Record<string, string | undefined> }>().headers;
    const given = headers['x-console-token'] ?? basicPassword(headers.authorization);
    if (given === undefined) {
      const response = http.getResponse<{
        setHeader?(n: string, v: string): void;
        header?(n: string, v: string): void;
      }>();
      const challenge = 'Basic realm="outbox console", charset="UTF-8"';
      if (response.setHeader) response.setHeader('WWW-Authenticate', challenge);
      else response.header?.('WWW-Authenticate', challenge);
      throw new UnauthorizedException('The outbox console needs the operator token (basic-auth password).');
    }
    if (!sameText(given, this.token)) throw new ForbiddenException('Wrong operator token for the outbox console.');
    return true;
  }
}

function basicPassword(authorization: string | undefined): string | undefined {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(authorization ?? '');
  if (!match) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? undefined : decoded.slice(colon + 1);
}

function sameText(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}
