import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from '../helpers/databases';
import { describeWith } from '../helpers/services';
import { FaultEffect } from './support/entities';
import { handlerDelay, startHttpApp } from './support/http-app';
import { isProblem, isReplay, postOrder, RawResponse } from './support/http';
import { recordFaultRun } from './support/report';

const SCENARIO = '5 HTTP storm';
const KEYS = 20;
const PER_KEY = 50;

for (const kind of ['postgres', 'mariadb'] as DatabaseKind[]) {
  describeWith(
    servicesOf(kind),
    `Fault ${SCENARIO}: ${KEYS} keys × ${PER_KEY} concurrent POSTs each on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let url: string;

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        ({ app, url } = await startHttpApp(db));
        handlerDelay.ms = 50;
      });

      afterAll(async () => {
        handlerDelay.ms = 0;
        await app?.close();
        await db?.drop();
      });

      it(`yields exactly ${KEYS} effects; every response is a 201, a replay or a 409, never a 5xx`, async () => {
        const run = `storm-${kind}-${Date.now()}`;
        const requests: Promise<RawResponse & { key: string }>[] = [];
        for (let k = 0; k < KEYS; k++) {
          const key = `${run}-${k}`;
          for (let i = 0; i < PER_KEY; i++)
            requests.push(postOrder(url, key, { sku: `sku-${k}`, quantity: k + 1 }).then((r) => ({ ...r, key })));
        }
        const responses = await Promise.all(requests);
        const effects = await app.get(DataSource).getRepository(FaultEffect).find();
        const perKey = new Map<string, number>();
        for (const e of effects) perKey.set(e.source, (perKey.get(e.source) ?? 0) + 1);

        const firsts = responses.filter((r) => r.status === 201 && !isReplay(r));
        const replays = responses.filter((r) => r.status === 201 && isReplay(r));
        const conflicts = responses.filter((r) => r.status === 409);
        const others = responses.filter((r) => r.status !== 201 && r.status !== 409);
        const http5xx = responses.filter((r) => r.status >= 500).length;
        recordFaultRun({
          scenario: SCENARIO,
          variant: DATABASE_LABEL[kind],
          events: responses.length,
          lost: KEYS - perKey.size,
          duplicateEffects: effects.length - perKey.size,
          http5xx,
        });

        expect(others.map((r) => `${r.status} ${r.body.slice(0, 200)}`)).toEqual([]);
        expect(effects).toHaveLength(KEYS);
        expect([...perKey.values()].every((n) => n === 1)).toBe(true);
        expect(firsts).toHaveLength(KEYS);
        expect(new Set(firsts.map((r) => r.key)).size).toBe(KEYS);
        // A replay carries the first response's body, byte for byte.
        for (const replay of replays) {
          const first = firsts.find((f) => f.key === replay.key)!;
          expect(replay.json).toEqual(first.json);
        }
        for (const conflict of conflicts) {
          expect(isProblem(conflict)).toBe(true);
          expect(conflict.headers['retry-after']).toBeDefined();
        }
        expect(firsts.length + replays.length + conflicts.length).toBe(KEYS * PER_KEY);
      });
    },
  );
}
