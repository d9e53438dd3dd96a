/**
 * Deeply nested JSON bodies (1,000–20,000 levels, up to body-parser's 100 kB) against `@Idempotent()`: the fingerprint
 * (src/idempotency/stable-json.ts) accepts up to `MAX_JSON_DEPTH` levels and refuses deeper bodies with a 400
 * problem+json (`body-nested-too-deeply`) instead of overflowing the stack — never a 5xx.
 */
import type { INestApplication } from '@nestjs/common';
import fc from 'fast-check';
import { DataSource } from 'typeorm';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from '../helpers/databases';
import { describeWith } from '../helpers/services';
import { FaultEffect } from './support/entities';
import { startHttpApp } from './support/http-app';
import { isProblem, isReplay, rawHead, rawRequest } from './support/http';
import { recordFaultRun } from './support/report';

describeWith(
  ['postgres'],
  `Fault 6 fuzzing: deeply nested JSON bodies against @Idempotent() on ${DATABASE_LABEL.postgres}`,
  () => {
    let db: TestDatabase;
    let app: INestApplication;
    let port: number;
    const statuses: number[] = [];

    beforeAll(async () => {
      db = await createTestDatabase('postgres');
      let url: string;
      ({ app, url } = await startHttpApp(db, { logger: false }));
      port = Number(new URL(url).port);
    });

    afterAll(async () => {
      recordFaultRun({
        scenario: '6 fuzzing',
        variant: `${DATABASE_LABEL.postgres}, deep nesting`,
        events: statuses.length,
        http5xx: statuses.filter((s) => s >= 500).length,
      });
      await app?.close();
      await db?.drop();
    });

    it('a body nested 1,000–20,000 levels deep is answered 201 (then replayed) or refused with a 4xx problem+json, never a 5xx', async () => {
      let n = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1_000, max: 20_000 }),
          fc.constantFrom('[', '{"a":'),
          async (depth, open) => {
            const close = open === '[' ? ']' : '}';
            const body = Buffer.from(open.repeat(depth) + (open === '[' ? '' : '1') + close.repeat(depth));
            // Keep under body-parser's 100 kB limit ('{"a":' deeper than ~17,000): a bigger body is refused with Express's
            // own 413 before any of the app's code runs, which is the body size limit at work, not the nesting.
            fc.pre(body.length <= 100 * 1024);
            const key = `deep-${Date.now()}-${n++}`;
            const send = () =>
              rawRequest(
                port,
                rawHead('POST', '/orders', [
                  ['Content-Type', 'application/json'],
                  ['Content-Length', String(body.length)],
                  ['Idempotency-Key', key],
                ]),
                body,
              );
            const first = await send();
            statuses.push(first.status);
            expect(first.status).toBeLessThan(500);
            if (first.status === 201) {
              const again = await send();
              statuses.push(again.status);
              expect(again.status).toBe(201);
              expect(isReplay(again)).toBe(true);
              expect(await app.get(DataSource).getRepository(FaultEffect).countBy({ source: key })).toBe(1);
            } else {
              expect(isProblem(first)).toBe(true);
              expect(first.status).toBe(400);
              expect(first.json).toMatchObject({ status: 400, code: 'body-nested-too-deeply' });
            }
          },
        ),
        { numRuns: 40 },
      );
    });
  },
);
