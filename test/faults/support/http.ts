import { request as httpRequest } from 'node:http';

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  json?: any;
}

/**
 * One HTTP request on its own connection with Node's http client (no retries, no pooling), so hundreds can run at
 * once. Header values are sent as given (latin1); the client refuses characters HTTP forbids, see `rawRequest`.
 */
export function send(
  url: string,
  method: string,
  headers: Record<string, string>,
  body?: string | Buffer,
  timeoutMs = 30_000,
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(parse(res.statusCode ?? 0, res.headers, Buffer.concat(chunks).toString('utf8'))));
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () =>
      req.destroy(new Error(`${method} ${url} got no response within ${timeoutMs} ms (a hang)`)),
    );
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

function parse(status: number, headers: RawResponse['headers'], body: string): RawResponse {
  let json: any;
  try {
    json = body.length > 0 ? JSON.parse(body) : undefined;
  } catch {
    json = undefined;
  }
  return { status, headers, body, json };
}

/** POST JSON with an idempotency key (and optional tenant). */
export function postOrder(url: string, key: string | undefined, body: unknown, tenant?: string): Promise<RawResponse> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (key !== undefined) headers['idempotency-key'] = key;
  if (tenant !== undefined) headers['x-tenant'] = tenant;
  return send(`${url}/orders`, 'POST', headers, JSON.stringify(body));
}

export const isReplay = (r: RawResponse) => String(r.headers['idempotent-replayed'] ?? '').toLowerCase() === 'true';
export const isProblem = (r: RawResponse) =>
  String(r.headers['content-type'] ?? '').startsWith('application/problem+json');

/**
 * Sends `head` (request line and headers, each line ended by CRLF, without the blank line) and `body` as raw bytes
 * on a fresh socket and reads the response until the server closes. Unlike Node's client, it sends anything — control
 * characters, CR/LF inside a header value, bytes above 0x7f — so the server's parser meets what an attacker sends.
 */
export function rawRequest(
  port: number,
  head: Buffer,
  body: Buffer = Buffer.alloc(0),
  timeoutMs = 30_000,
): Promise<RawResponse> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { connect } = require('node:net') as typeof import('node:net');
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`no response within ${timeoutMs} ms (a hang)`)));
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (error: NodeJS.ErrnoException) =>
      chunks.length > 0 && error.code === 'ECONNRESET' ? finish() : reject(error),
    );
    socket.on('end', () => finish());
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      socket.destroy();
      const all = Buffer.concat(chunks);
      const split = all.indexOf('\r\n\r\n');
      const headText = all.subarray(0, split === -1 ? all.length : split).toString('latin1');
      let rest: Buffer = split === -1 ? Buffer.alloc(0) : all.subarray(split + 4);
      const [statusLine, ...lines] = headText.split('\r\n');
      const headers: RawResponse['headers'] = {};
      for (const line of lines) {
        const i = line.indexOf(':');
        if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      if (String(headers['transfer-encoding']).toLowerCase() === 'chunked') rest = dechunk(rest);
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1] ?? 0);
      resolve(parse(status, headers, rest.toString('utf8')));
    };
    socket.write(Buffer.concat([head, Buffer.from('Connection: close\r\n\r\n', 'latin1'), body]));
  });
}

function dechunk(data: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = data.indexOf('\r\n', at);
    if (eol === -1) break;
    const size = parseInt(data.subarray(at, eol).toString('latin1'), 16);
    if (!size) break;
    out.push(data.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}

/** A request head for `rawRequest`: `method path`, then headers given as [name, value bytes] pairs. */
export function rawHead(method: string, path: string, headers: [string, Buffer | string][]): Buffer {
  const parts: Buffer[] = [Buffer.from(`${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n`, 'latin1')];
  for (const [name, value] of headers)
    parts.push(
      Buffer.from(`${name}: `, 'latin1'),
      Buffer.isBuffer(value) ? value : Buffer.from(value, 'utf8'),
      Buffer.from('\r\n', 'latin1'),
    );
  return Buffer.concat(parts);
}
