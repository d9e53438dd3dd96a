import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { IdempotencyRecord } from '../../src/schema/idempotency-record.entity';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from '../helpers/databases';
import { waitFor } from '../helpers/ports';
import { describeWith } from '../helpers/services';
import { FaultEffect } from './support/entities';
import { startHttpApp } from './support/http-app';
import { isReplay, RawResponse, send } from './support/http';
import { recordFaultRun } from './support/report';

const SCENARIO = '8 security';

/**
 * A key as an RFC 8941 sf-string (`"…"`, with `\\` and `\"` escaped): the form the Idempotency-Key draft writes. A
 * bare header value that starts with a double quote is read as such a string, so hostile keys travel quoted.
 */
const sfString = (key: string) => `"${key.replace(/[\\"]/g, (c) => `\\${c}`)}"`;

/** Inputs that break SQL built by concatenation (PostgreSQL and MySQL quoting, comments, backslash escapes). */
const HOSTILE = [
  "'; DROP TABLE fault_effects; --",
  "' OR '1'='1",
  '" OR ""="',
  "\\'; DELETE FROM idempotency_keys; -- ",
  '\\',
  '$$; DROP TABLE idempotency_keys; $$',
  "%' UNION SELECT 1 --",
  '`id`',
];

for (const kind of ['postgres', 'mariadb'] as DatabaseKind[]) {
  describeWith(
    servicesOf(kind),
    `Fault ${SCENARIO}: scopes, hostile input and expiry on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let url: string;
      const responses: RawResponse[] = [];
      const post = async (key: string | undefined, body: unknown, tenant?: string, path = '/orders') => {
        const headers: Record<string, string> = { 'content-type': 'application/json' };
        if (key !== undefined) headers['idempotency-key'] = key;
        if (tenant !== undefined) headers['x-tenant'] = tenant;
        const r = await send(`${url}${path}`, 'POST', headers, JSON.stringify(body));
        responses.push(r);
        return r;
      };

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        ({ app, url } = await startHttpApp(db, {
          outbox: { publisher: { enabled: false }, cleanup: { interval: 250 } } as any,
        }));
      });

      afterAll(async () => {
        // The expiry check applies its key twice on purpose (the second time after the record expired).
        const effects = (await app.get(DataSource).getRepository(FaultEffect).find()).filter(
          (e) => !e.source.startsWith('expiring-'),
        );
        const distinct = new Set(effects.map((e) => `${e.scope}\u0000${e.source}`));
        recordFaultRun({
          scenario: SCENARIO,
          variant: DATABASE_LABEL[kind],
          events: responses.length,
          duplicateEffects: effects.length - distinct.size,
          http5xx: responses.filter((r) => r.status >= 500).length,
        });
        await app?.close();
        await db?.drop();
      });

      it("a key reused under another scope (tenant) runs anew and never returns the first scope's response", async () => {
        const key = `shared-${Date.now()}`;
        const a = await post(key, { secret: 'tenant A data' }, 'tenant-a');
        expect(a.status).toBe(201);
        expect(isReplay(a)).toBe(false);
        // Same key, same body, other tenant: its own first response, not A's.
        const b = await post(key, { secret: 'tenant A data' }, 'tenant-b');
        expect(b.status).toBe(201);
        expect(isReplay(b)).toBe(false);
        expect(b.json.tenant).toBe('tenant-b');
        expect(b.json.effectId).not.toBe(a.json.effectId);
        // Other tenant, other body: not a 422 (the key is not A's), and nothing of A's in it.
        const c = await post(key, { other: true }, 'tenant-c');
        expect(c.status).toBe(201);
        expect(c.body).not.toContain('tenant A data');
        // No tenant at all: the unscoped record is a fourth, independent one.
        const d = await post(key, { secret: 'tenant A data' });
        expect(d.status).toBe(201);
        expect(isReplay(d)).toBe(false);
        expect(d.json.tenant).toBeNull();
        // Each tenant replays its own.
        const a2 = await post(key, { secret: 'tenant A data' }, 'tenant-a');
        const b2 = await post(key, { secret: 'tenant A data' }, 'tenant-b');
        expect([isReplay(a2), isReplay(b2)]).toEqual([true, true]);
        expect(a2.json).toEqual(a.json);
        expect(b2.json).toEqual(b.json);
        expect(await app.get(DataSource).getRepository(FaultEffect).countBy({ source: key })).toBe(4);
      });

      it('keys, scopes and bodies are never built into SQL: hostile input is stored and replayed verbatim', async () => {
        const ds = app.get(DataSource);
        for (const [i, hostile] of HOSTILE.entries()) {
          const key = `${hostile}-${Date.now()}-${i}`;
          const tenant = `${hostile}-tenant`;
          const body = { note: hostile };
          const first = await post(sfString(key), body, tenant);
          expect(first.status).toBe(201);
          expect(first.json).toMatchObject({ key, tenant, received: body });
          // The same key sent bare where that is unambiguous (it does not start with a quote): still the same key.
          const again = await post(key.startsWith('"') ? sfString(key) : key, body, tenant);
          expect(again.status).toBe(201);
          expect(isReplay(again)).toBe(true);
          expect(again.json).toEqual(first.json);
          const record = await ds.getRepository(IdempotencyRecord).findOneByOrFail({ key, scope: tenant });
          expect(record.key).toBe(key);
          expect(await ds.getRepository(FaultEffect).countBy({ source: key, scope: tenant })).toBe(1);
        }
        // The tables the hostile strings name are all still there, with their rows.
        expect(await ds.getRepository(FaultEffect).count()).toBeGreaterThanOrEqual(HOSTILE.length);
        expect(await ds.getRepository(IdempotencyRecord).count()).toBeGreaterThanOrEqual(HOSTILE.length);
      });

      it('expired records are no longer replayed and are purged by the scheduled cleanup', async () => {
        const ds = app.get(DataSource);
        const key = `expiring-${Date.now()}`;
        const first = await post(key, { n: 1 }, 'tenant-x', '/orders/short-lived');
        expect(first.status).toBe(201);
        expect(await ds.getRepository(IdempotencyRecord).countBy({ key })).toBe(1);
        // The cleanup removes the record once it has expired (on the database clock).
        await waitFor(
          async () => (await ds.getRepository(IdempotencyRecord).countBy({ key })) === 0,
          'the expired record to be purged',
          30_000,
        );
        // The key is free again: a new request runs the handler (no replay of the expired response).
        const again = await post(key, { n: 1 }, 'tenant-x', '/orders/short-lived');
        expect(again.status).toBe(201);
        expect(isReplay(again)).toBe(false);
        expect(again.json.effectId).not.toBe(first.json.effectId);
      });
    },
  );
}
