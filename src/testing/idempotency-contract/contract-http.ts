import type { INestApplication } from '@nestjs/common';
import type { IdempotencyContractRequest } from './idempotency-contract.options';

/** A response as the kit reads it. */
export interface ContractResponse {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed body, when it is JSON. */
  json: unknown;
}

/** Sends the kit's requests to one route with Node's `fetch` (no HTTP client dependency, any test framework). */
export class ContractHttp {
  constructor(
    private readonly baseUrl: string,
    private readonly method: string,
    private readonly path: string,
    private readonly header: string,
    private readonly headers: Record<string, string>,
  ) {}

  /** Sends `request` with `key` in the key header (none when undefined). */
  async send(key: string | undefined, request: IdempotencyContractRequest): Promise<ContractResponse> {
    const headers: Record<string, string> = { ...this.headers, ...(request.headers ?? {}) };
    if (key !== undefined) headers[this.header] = key;
    if (request.body !== undefined) headers['content-type'] ??= 'application/json';
    const response = await fetch(new URL(this.path, this.baseUrl), {
      method: this.method,
      headers,
      body: request.body === undefined ? undefined : JSON.stringify(request.body),
    });
    const text = await response.text();
    let json: unknown;
    try {
      json = text.length > 0 ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: response.status, headers: response.headers, text, json };
  }
}

/** The base URL of `app`: a string as given; an app's own URL, after `listen(0, '127.0.0.1')` when not listening. */
export async function baseUrlOf(app: INestApplication | string): Promise<string> {
  if (typeof app === 'string') return app;
  const server = app.getHttpServer();
  if (!server?.listening) await app.listen(0, '127.0.0.1');
  const url = await app.getUrl();
  // Servers listening on every address report `[::]` or `0.0.0.0`, which is no address to connect to.
  return url.replace('//[::]', '//127.0.0.1').replace('//0.0.0.0', '//127.0.0.1');
}

/** One line about a response for a failure message: status, content type and the start of the body. */
export function describeResponse(response: ContractResponse): string {
  const type = response.headers.get('content-type') ?? 'no content type';
  const replayed = response.headers.get('idempotent-replayed');
  const body = response.text.length > 200 ? `${response.text.slice(0, 200)}…` : response.text;
  return `${response.status} (${type}${replayed ? `, Idempotent-Replayed: ${replayed}` : ''}) ${body}`;
}
