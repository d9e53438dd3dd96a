import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { OnOutboxEvent, OutboxEventContext, OutboxMessage, OutboxService } from '../src';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { IdempotencyStep } from '../src/schema/idempotency-step.entity';
import { CreateOutboxTables1764374400000 } from '../src/schema/migrations/1764374400000-outbox-tables';
import { CreateIdempotencyKeys1764460800000 } from '../src/schema/migrations/1764460800000-idempotency-keys';
import { AddOutboxAttempts1765152000000 } from '../src/schema/migrations/1765152000000-outbox-attempts';
import { CreateIdempotencySteps1765411200000 } from '../src/schema/migrations/1765411200000-idempotency-steps';
import { AddOutboxDestinations1765497600000 } from '../src/schema/migrations/1765497600000-outbox-destinations';
import { OutboxAttempt } from '../src/schema/outbox-attempt.entity';
import { OutboxKeyLock } from '../src/schema/outbox-key-lock.entity';
import { OutboxDatabase } from '../src/dialects/outbox-database';
import type { ClaimedOutboxRow } from '../src/dialects/outbox-dialect';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/** Two handlers of one pattern: `steady` always succeeds, `stalled` fails while `blocked` is set. */
@Injectable()
class SplitHandlers {
  /** Successful runs, in order, per handler. */
  readonly done: Record<'steady' | 'stalled', string[]> = { steady: [], stalled: [] };
  readonly failures: string[] = [];
  blocked = true;

  @OnOutboxEvent('Split', { name: 'steady' })
  steady(_payload: unknown, context: OutboxEventContext) {
    this.done.steady.push(context.messageId);
  }

  @OnOutboxEvent('Split', { name: 'stalled' })
  stalled(_payload: unknown, context: OutboxEventContext) {
    if (this.blocked) {
      this.failures.push(context.messageId);
      throw new Error(`stalled on ${context.messageId}`);
    }
    this.done.stalled.push(context.messageId);
  }
}

const BEFORE_DESTINATIONS = [
  CreateOutboxTables1764374400000,
  CreateIdempotencyKeys1764460800000,
  AddOutboxAttempts1765152000000,
  CreateIdempotencySteps1765411200000,
];

const kinds: DatabaseKind[] = ['postgres', 'mariadb', 'sqlite'];

for (const kind of kinds) {
  describeWith(servicesOf(kind), `Per-destination delivery on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useTestDatabase(kind);
    const legacy = { l1: `legacy-1-${randomUUID()}`, l2: `legacy-2-${randomUUID()}` };
    let outbox: OutboxService;
    let handlers: SplitHandlers;
    let dataSource: DataSource;

    const rowsOf = async (id: string) =>
      (await dataSource.getRepository(OutboxMessage).find({ where: { messageId: id }, order: { seq: 'ASC' } })).map(
        (r) => ({ destination: r.destination, status: r.status }),
      );
    const allSent = async (ids: string[]) =>
      (await Promise.all(ids.map(rowsOf))).every((rows) => rows.length > 0 && rows.every((r) => r.status === 'sent'));

    beforeAll(async () => {
      // A database of the previous version, with rows it wrote (no destination column yet) ...
      const entities = [OutboxMessage, OutboxKeyLock, OutboxAttempt, IdempotencyRecord, IdempotencyStep];
      const options = { ...fx.db.options, entities, migrations: BEFORE_DESTINATIONS, logging: false };
      const ds = new DataSource(options as never);
      await ds.initialize();
      try {
        await ds.runMigrations();
        const t = (n: string) => ds.driver.escape(n);
        const columns = ['message_id', 'pattern', 'payload', 'ordering_key', 'status', 'attempts', 'available_at'];
        await ds.query(
          `INSERT INTO ${t('outbox_messages')} (${[...columns, 'created_at'].map(t).join(', ')}) VALUES ` +
            `('${legacy.l1}', 'Split', '{}', 'up', 'pending', 0, 0, 0), ` +
            `('${legacy.l2}', 'Split', '{}', 'up', 'pending', 0, 0, 0)`,
        );
        // ... then the migration of this version.
        const runner = ds.createQueryRunner();
        try {
          await new AddOutboxDestinations1765497600000().up(runner);
        } finally {
          await runner.release();
        }
      } finally {
        await ds.destroy();
      }
      const app = await fx.start({
        logger: false,
        providers: [SplitHandlers],
        outbox: {
          client: undefined,
          publisher: { pollingInterval: 50 },
          retry: { initialDelay: 20, maxDelay: 100, maxAttempts: 1000, jitter: 0 },
        },
      });
      outbox = app.get(OutboxService);
      handlers = app.get(SplitHandlers);
      dataSource = app.get(DataSource);
    });

    it("delivers the rows written before the migration (destination '') to every destination, before the key's new rows", async () => {
      // A message of the same key written by this version: one row per handler, held back by the older rows.
      const fresh = await outbox.transaction(() => outbox.emit('Split', {}, { key: 'up' }));
      expect(await rowsOf(fresh)).toEqual([
        { destination: 'handler:steady', status: 'pending' },
        { destination: 'handler:stalled', status: 'pending' },
      ]);
      expect(await rowsOf(legacy.l1)).toEqual([{ destination: '', status: 'pending' }]);
      // The older row's delivery needs both handlers: `stalled` fails, so it is retried (`steady` is not run again).
      await waitFor(() => handlers.failures.filter((id) => id === legacy.l1).length >= 3, 'the old row to be retried');
      expect(handlers.done.steady).toEqual([legacy.l1]);

      handlers.blocked = false;
      await waitFor(() => allSent([legacy.l1, legacy.l2, fresh]), 'every row to be sent');
      expect(handlers.done.steady).toEqual([legacy.l1, legacy.l2, fresh]);
      expect(handlers.done.stalled).toEqual([legacy.l1, legacy.l2, fresh]);
    });

    it("keeps a key's order per destination: a failing handler holds back only its own rows of the key", async () => {
      handlers.blocked = true;
      handlers.done.steady.length = 0;
      handlers.done.stalled.length = 0;
      handlers.failures.length = 0;
      const ids = await outbox.transaction(async () => {
        const written: string[] = [];
        for (let i = 0; i < 6; i++) written.push(await outbox.emit('Split', { i }, { key: 'split' }));
        return written;
      });
      // `steady` gets every message of the key, in order, while `stalled` keeps failing on the first.
      await waitFor(() => handlers.done.steady.length === ids.length, "the steady handler to get the key's messages");
      expect(handlers.done.steady).toEqual(ids);
      await waitFor(() => handlers.failures.length >= 2, 'the stalled handler to be retried');
      expect(new Set(handlers.failures)).toEqual(new Set([ids[0]]));
      const stalledRows = await Promise.all(ids.map(async (id) => (await rowsOf(id))[1]));
      expect(stalledRows).toEqual(ids.map(() => ({ destination: 'handler:stalled', status: 'pending' })));

      handlers.blocked = false;
      await waitFor(() => allSent(ids), 'the stalled handler to catch up');
      expect(handlers.done.stalled).toEqual(ids);
      expect(handlers.done.steady).toEqual(ids); // never run again
    });
  });
}

/**
 * Concurrent claims over per-destination rows: four claimers (each claim in its own transaction, as four
 * publishers' would be) drain keyed rows of two destinations; no row is claimed twice, and each (key, destination)
 * is claimed in write order.
 */
for (const kind of ['postgres', 'mariadb'] as DatabaseKind[]) {
  describeWith(servicesOf(kind), `Concurrent claims of per-destination rows on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useTestDatabase(kind);

    it('never claims a row twice, and claims each key at each destination in order', async () => {
      const app = await fx.start({ logger: false, outbox: { publisher: { enabled: false } } });
      const { dataSource, dialect, table } = app.get(OutboxDatabase);
      const rows = [];
      for (let i = 0; i < 120; i++) {
        const messageId = `m-${i}-${randomUUID()}`;
        const key = i % 5 === 4 ? null : `k${i % 4}`;
        for (const destination of ['broker:A', 'handler:h']) {
          rows.push({ messageId, pattern: 'E', payload: '{}', headers: null, key, destination });
        }
      }
      await dialect.insert(dataSource.manager, table, rows);

      const claimed: ClaimedOutboxRow[] = [];
      let sent = 0;
      const claimer = async () => {
        let idle = 0;
        while (sent < rows.length && idle < 400) {
          const owner = randomUUID();
          const batch = await dialect.claim(dataSource.manager, { table, owner, limit: 7, leaseMs: 60_000 });
          if (batch.length === 0) {
            idle++;
            await new Promise((resolve) => setTimeout(resolve, 5));
            continue;
          }
          idle = 0;
          claimed.push(...batch);
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 10));
          const marked = await dialect.markSent(
            dataSource.manager,
            table,
            owner,
            batch.map((r) => r.seq),
          );
          sent += marked;
        }
      };
      await Promise.all([claimer(), claimer(), claimer(), claimer()]);

      expect(sent).toBe(rows.length);
      const seqs = claimed.map((r) => r.seq);
      expect(new Set(seqs).size).toBe(seqs.length); // no row twice
      expect(seqs.length).toBe(rows.length);
      const streams = new Map<string, bigint[]>();
      for (const row of claimed) {
        if (row.key === null) continue;
        const stream = `${row.key} → ${row.destination}`;
        streams.set(stream, [...(streams.get(stream) ?? []), BigInt(row.seq)]);
      }
      expect(streams.size).toBe(8);
      for (const [stream, order] of streams) {
        expect({ stream, order }).toEqual({ stream, order: [...order].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)) });
      }
    });
  });
}
