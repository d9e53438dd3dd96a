import type { INestApplication } from '@nestjs/common';
import fc from 'fast-check';
import { DataSource } from 'typeorm';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from '../helpers/databases';
import { describeWith } from '../helpers/services';
import { FaultEffect } from './support/entities';
import { startHttpApp } from './support/http-app';
import { isProblem, isReplay, rawHead, rawRequest, RawResponse } from './support/http';
import { recordFaultRun } from './support/report';

const SCENARIO = '6 fuzzing';
/** Runs per property; every run sends one to three requests. */
const RUNS = 120;
/** Statuses the specification allows here: created, replayed, and the client errors the endpoint can give. */
const ALLOWED = new Set([200, 201, 400, 404, 409, 413, 415, 422]);

describeWith(
  ['postgres'],
  `Fault ${SCENARIO}: fast-check keys, bodies, methods and content types against @Idempotent() on ${DATABASE_LABEL.postgres}`,
  () => {
    let db: TestDatabase;
    let app: INestApplication;
    let port: number;
    const responses: RawResponse[] = [];
    let unique = 0;
    const fresh = (label: string) => `fz-${Date.now().toString(36)}-${unique++}-${label}`;

    beforeAll(async () => {
      db = await createTestDatabase('postgres');
      let url: string;
      ({ app, url } = await startHttpApp(db, { logger: false }));
      port = Number(new URL(url).port);
    });

    afterAll(async () => {
      const effects = await app.get(DataSource).getRepository(FaultEffect).find();
      const perKey = new Map<string, number>();
      for (const e of effects)
        perKey.set(`${e.scope}\u0000${e.source}`, (perKey.get(`${e.scope}\u0000${e.source}`) ?? 0) + 1);
      recordFaultRun({
        scenario: SCENARIO,
        variant: DATABASE_LABEL.postgres,
        events: responses.length,
        duplicateEffects: effects.length - perKey.size,
        http5xx: responses.filter((r) => r.status >= 500).length,
      });
      await app?.close();
      await db?.drop();
    });

    /** POST /orders with raw key bytes and body; records the response. */
    async function post(
      key: Buffer | string | undefined,
      body: Buffer | string,
      contentType = 'application/json',
      method = 'POST',
      path = '/orders',
    ): Promise<RawResponse> {
      const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8');
      const headers: [string, Buffer | string][] = [
        ['Content-Type', contentType],
        ['Content-Length', String(bytes.length)],
      ];
      if (key !== undefined) headers.push(['Idempotency-Key', key]);
      const response = await rawRequest(port, rawHead(method, path, headers), bytes);
      responses.push(response);
      return response;
    }

    const effectsOf = async (source: string) =>
      app.get(DataSource).getRepository(FaultEffect).countBy({ source, scope: '' });

    /** What every response must satisfy: an allowed status, problem+json for the idempotency errors, never a 5xx. */
    function checkResponse(r: RawResponse): void {
      if (!ALLOWED.has(r.status)) throw new Error(`status ${r.status} is not allowed: ${r.body.slice(0, 300)}`);
      if ([409, 422].includes(r.status) && !isProblem(r))
        throw new Error(`${r.status} without problem+json: ${r.body.slice(0, 200)}`);
    }

    /** A first request answered 201 applied exactly one effect; the same request again replays it and applies none. */
    async function checkOnceAndReplay(first: RawResponse, again: () => Promise<RawResponse>): Promise<void> {
      checkResponse(first);
      if (first.status !== 201) return;
      if (isReplay(first)) throw new Error('a fresh key was answered as a replay');
      const key: string = first.json.key;
      expect(await effectsOf(key)).toBe(1);
      const second = await again();
      checkResponse(second);
      expect(second.status).toBe(201);
      expect(isReplay(second)).toBe(true);
      expect(second.json).toEqual(first.json);
      expect(await effectsOf(key)).toBe(1);
    }

    it('keys at the limits: empty and blank → 400, 255 characters → 201 then replay, 256 → 400 (problem+json)', async () => {
      for (const key of ['', '   ']) {
        const r = await post(key, '{"a":1}');
        expect(r.status).toBe(400);
        expect(isProblem(r)).toBe(true);
      }
      const k255 = fresh('x').padEnd(255, 'k');
      await checkOnceAndReplay(await post(k255, '{"a":1}'), () => post(k255, '{"a":1}'));
      const r256 = await post(fresh('y').padEnd(256, 'k'), '{"a":1}');
      expect(r256.status).toBe(400);
      expect(isProblem(r256)).toBe(true);
      const missing = await post(undefined, '{"a":1}');
      expect(missing.status).toBe(400);
      expect(isProblem(missing)).toBe(true);
    });

    it('fuzzed keys (unicode, control characters, header injection, long) → only 201/400, each accepted key applied once', async () => {
      const keyArb = fc.oneof(
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 80 }),
        fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }),
        fc.string({ minLength: 240, maxLength: 270 }),
        fc.constantFrom(
          'k\r\nX-Injected: 1',
          'k\nIdempotency-Key: other',
          'k\r\n\r\nGET / HTTP/1.1',
          'k\u0000nul',
          'k\ttab',
          '\u00ff\u00fe',
          "k'; DROP TABLE fault_effects; --",
          'k\u2028\u2029',
          'k\u0007bell',
        ),
      );
      await fc.assert(
        fc.asyncProperty(keyArb, async (suffix) => {
          const key = Buffer.from(`${fresh('k')}-${suffix}`, 'utf8');
          await checkOnceAndReplay(await post(key, '{"n":1}'), () => post(key, '{"n":1}'));
        }),
        { numRuns: RUNS },
      );
    });

    it('fuzzed bodies (JSON values, deeply nested, large, non-JSON) → only 201/400/413, never a double effect', async () => {
      const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
      const bodyArb = fc.oneof(
        fc.json({ depthSize: 'medium' }),
        fc.integer({ min: 10, max: 5_000 }).map(nested), // deeper than MAX_JSON_DEPTH (1,000): 400 problem+json
        fc.integer({ min: 50_000, max: 200_000 }).map((n) => JSON.stringify({ blob: 'x'.repeat(n) })),
        fc.string({ unit: 'binary', maxLength: 200 }),
        fc.constantFrom(
          '',
          '{',
          '{"a":',
          'null',
          '"just a string"',
          '[1,2,',
          '\u0000',
          '{"__proto__":{"polluted":true}}',
          '{"constructor":{"prototype":{"x":1}}}',
        ),
      );
      await fc.assert(
        fc.asyncProperty(bodyArb, async (body) => {
          const key = fresh('b');
          const first = await post(key, body);
          await checkOnceAndReplay(first, () => post(key, body));
        }),
        { numRuns: RUNS },
      );
      expect(({} as any).polluted).toBeUndefined();
    });

    it('the same object with its keys permuted has the same fingerprint (replay, not 422); another body → 422', async () => {
      const permute = (value: unknown, order: number[]): unknown => {
        if (Array.isArray(value)) return value.map((v) => permute(v, order));
        if (value && typeof value === 'object') {
          const entries = Object.entries(value as Record<string, unknown>);
          const shuffled = entries
            .map((e, i) => [order[i % order.length] ?? 0, i, e] as const)
            .sort((a, b) => a[0] - b[0] || a[1] - b[1])
            .map(([, , e]) => e);
          return Object.fromEntries(shuffled.map(([k, v]) => [k, permute(v, order)]));
        }
        return value;
      };
      await fc.assert(
        fc.asyncProperty(
          fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.jsonValue({ maxDepth: 3 }), {
            minKeys: 2,
            maxKeys: 8,
          }),
          fc.array(fc.nat(100), { minLength: 8, maxLength: 8 }),
          async (object, order) => {
            const key = fresh('p');
            const first = await post(key, JSON.stringify(object));
            checkResponse(first);
            expect(first.status).toBe(201);
            const permuted = await post(key, JSON.stringify(permute(object, order)));
            checkResponse(permuted);
            expect(permuted.status).toBe(201);
            expect(isReplay(permuted)).toBe(true);
            const other = await post(key, JSON.stringify({ ...object, 'another field': true }));
            expect(other.status).toBe(422);
            expect(isProblem(other)).toBe(true);
            expect(await effectsOf(first.json.key)).toBe(1);
          },
        ),
        { numRuns: RUNS },
      );
    });

    it('fuzzed methods and content types → only the specified 2xx/4xx, never a double effect', async () => {
      const methodArb = fc.constantFrom('POST', 'POST', 'POST', 'GET', 'PUT', 'PATCH', 'DELETE', 'OPTIONS');
      const typeArb = fc.constantFrom(
        'application/json',
        'application/json; charset=utf-8',
        'application/json; charset=utf-16',
        'application/json; charset=klingon',
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/octet-stream',
        'application/problem+json',
        '',
      );
      const bodyArb = fc.oneof(
        fc.json({ maxDepth: 2 }),
        fc.constantFrom('a=1&b=2', '--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--x--', 'garbage'),
      );
      await fc.assert(
        fc.asyncProperty(methodArb, typeArb, bodyArb, async (method, type, body) => {
          const key = fresh('m');
          const first = await post(key, body, type, method);
          if (method === 'POST') await checkOnceAndReplay(first, () => post(key, body, type, method));
          else checkResponse(first);
        }),
        { numRuns: RUNS },
      );
    });

    it('summary: no 5xx at all, and no key applied twice', async () => {
      const rows: { source: string; n: string | number }[] = await app
        .get(DataSource)
        .query('SELECT source, COUNT(*) AS n FROM fault_effects GROUP BY scope, source HAVING COUNT(*) > 1');
      expect(rows).toEqual([]);
      expect(responses.filter((r) => r.status >= 500).map((r) => `${r.status} ${r.body.slice(0, 200)}`)).toEqual([]);
    });
  },
);
