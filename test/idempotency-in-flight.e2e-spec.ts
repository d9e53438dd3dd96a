import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OutboxDatabase } from '../src/dialects/outbox-database';
import type { IdempotencyStore, IdempotencyStoreConfig } from '../src/dialects/key-store';
import { beginAttempt, type IdempotencyBegin } from '../src/idempotency/idempotency.service';
import { resolveIdempotencyStore } from '../src/dialects/resolve-key-store';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { TestOrder } from './fixtures/order.entity';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { describeWith } from './helpers/services';

const HOUR = 3_600_000;
const F = 'a'.repeat(64);
const G = 'b'.repeat(64);

/**
 * PostgreSQL (advisory locks) and MySQL/MariaDB (named locks) decide "in flight: the same request (409) or another
 * one (422)?" with two locks, which no two sessions take at the same instant. A storm of retries of one request must
 * never be told it is another request (CI once saw two 422s among 1,000 identical POSTs on MariaDB), and another
 * request in flight must still be told so.
 */
for (const kind of ['postgres', 'mariadb'] as DatabaseKind[])
  describeWith(
    servicesOf(kind),
    `${DATABASE_LABEL[kind]} idempotency store: in flight, same or different request`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let store: IdempotencyStore;
      let config: IdempotencyStoreConfig;

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        const moduleRef = await createOutboxTestingModule({
          db: {
            ...db,
            options: { ...db.options, extra: { connectionLimit: 40, max: 40 } } as TestDatabase['options'],
          },
          outbox: { publisher: { enabled: false } },
        });
        app = moduleRef.createNestApplication({ logger: false });
        await app.init();
        config = {
          dataSource: app.get(DataSource),
          dialect: app.get(OutboxDatabase).dialect,
          table: 'idempotency_keys',
        };
        store = resolveIdempotencyStore(config);
      });

      afterAll(async () => {
        await app?.close();
        await db?.drop();
      });

      /** One caller: takes the key, and when it wins, writes an order, holds the key `holdMs`, commits. */
      const call = async (
        key: string,
        fingerprint: string,
        holdMs: number,
      ): Promise<IdempotencyBegin['kind'] | string> => {
        const begun = await beginAttempt(store, config, '', key, fingerprint);
        if (begun.kind === 'in-flight') return begun.sameRequest ? 'in-flight same' : 'in-flight other';
        if (begun.kind === 'stored') return begun.record.fingerprint === fingerprint ? 'stored same' : 'stored other';
        const { attempt } = begun;
        await attempt.run(() => attempt.context.manager.insert(TestOrder, { reference: key, amount: 1 }));
        await new Promise((resolve) => setTimeout(resolve, holdMs));
        await attempt.commit({ fingerprint, status: 201, body: '{}', headers: null, ttl: HOUR });
        return 'first';
      };

      it('a storm of one request (20 callers a key at once, then in waves) is never told it is another request', async () => {
        const answers: string[] = [];
        let keys = 0;
        // Each round: 6 new keys, 20 callers each at once (the race of the first lock), then waves spread over the
        // holder's whole life, its release included.
        for (let round = 0; round < 24; round++) {
          const fresh = Array.from({ length: 6 }, (_, k) => `storm-${Date.now()}-${round}-${k}`);
          keys += fresh.length;
          const waves = Array.from({ length: 4 }, (_, wave) =>
            new Promise((resolve) => setTimeout(resolve, wave * 7)).then(() =>
              Promise.all(fresh.flatMap((key) => Array.from({ length: wave === 0 ? 20 : 4 }, () => call(key, F, 20)))),
            ),
          );
          for (const wave of await Promise.all(waves)) answers.push(...wave);
        }
        const counts = answers.reduce<Record<string, number>>((n, a) => ({ ...n, [a]: (n[a] ?? 0) + 1 }), {});
        expect(counts['in-flight other']).toBeUndefined();
        expect(counts['stored other']).toBeUndefined();
        expect(counts.first).toBe(keys);
        expect(await app.get(DataSource).getRepository(TestOrder).count()).toBe(keys);
      });

      it('another request with the key while the first is in flight is told so (422), and the first one still wins', async () => {
        const key = `other-${Date.now()}`;
        const begun = await beginAttempt(store, config, '', key, F);
        if (begun.kind !== 'acquired') throw new Error(`expected the key, got ${begun.kind}`);
        expect(await call(key, G, 0)).toBe('in-flight other');
        expect(await call(key, F, 0)).toBe('in-flight same');
        await begun.attempt.commit({ fingerprint: F, status: 201, body: '{}', headers: null, ttl: HOUR });
        expect(await call(key, G, 0)).toBe('stored other');
        expect(await call(key, F, 0)).toBe('stored same');
      });
    },
  );
