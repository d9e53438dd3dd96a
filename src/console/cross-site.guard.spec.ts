import type { ExecutionContext } from '@nestjs/common';
import { CrossSiteGuard } from './cross-site.guard';

const guard = new CrossSiteGuard();
const context = (headers: Record<string, string>) =>
  ({ switchToHttp: () => ({ getRequest: () => ({ headers }) }) }) as unknown as ExecutionContext;
const statusOf = (headers: Record<string, string>) => {
  try {
    return guard.canActivate(context(headers)) ? 200 : 0;
  } catch (error) {
    return (error as { getStatus(): number }).getStatus();
  }
};
const page = { 'x-outbox-console': '1', 'content-type': 'application/json', host: 'ops.example:8080' };

describe('CrossSiteGuard', () => {
  it('lets the console page through: header, JSON, same origin or none', () => {
    expect(statusOf(page)).toBe(200);
    expect(statusOf({ ...page, origin: 'https://ops.example:8080', 'sec-fetch-site': 'same-origin' })).toBe(200);
    expect(statusOf({ ...page, 'content-type': 'application/json; charset=utf-8' })).toBe(200);
  });

  it('refuses what another site can make a browser send', () => {
    expect(statusOf({ ...page, 'x-outbox-console': '' })).toBe(403);
    expect(statusOf({ 'content-type': 'application/json', host: 'ops.example:8080' })).toBe(403);
    expect(statusOf({ ...page, 'sec-fetch-site': 'cross-site' })).toBe(403);
    expect(statusOf({ ...page, origin: 'https://evil.example' })).toBe(403);
    expect(statusOf({ ...page, origin: 'https://ops.example:9090' })).toBe(403);
    expect(statusOf({ ...page, origin: 'null' })).toBe(403);
    expect(statusOf({ ...page, 'content-type': 'text/plain' })).toBe(415);
    expect(statusOf({ ...page, 'content-type': 'application/jsonp' })).toBe(415);
  });
});
