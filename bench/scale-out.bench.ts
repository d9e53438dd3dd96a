/**
 * scale-out: 1, 2 and 4 publishers claiming from the same outbox table, each with its own DataSource and the
 * library's dialect (the claim, `markSent` fenced by the owner token), with no broker: a publish is simulated by a
 * pause of PUBLISH_MS per batch, so the database's share is what is measured. Half the rows are keyed (1,000
 * keys), so publishers also meet each other's keys. Per publisher count: claims that took rows per second, rows per
 * second, and
 * conflicts — claims that came back short (fewer rows than asked while more were pending: rows held by another
 * publisher's claim, or keyed rows behind another publisher's claimed ones), empty claims, and errors (deadlocks,
 * serialization failures). On a 2-core machine this shows the contention, not the throughput several machines
 * would reach: docs/scaling.md says how to read it.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { DataSource, DataSourceOptions } from 'typeorm';
import type { SqlOutboxDialect } from '../src/dialects/sql-dialect.base';
import type { Bench } from './bench-kit';
import { analyze, BenchDatabaseKind, createDatabase, SeededDatabase, seedRows } from './claim-scale-db';
import { sleep } from './relay-support';

const ROWS = Number(process.env.SCALE_OUT_ROWS ?? 40_000);
const BATCH = 500;
const PUBLISH_MS = Number(process.env.SCALE_OUT_PUBLISH_MS ?? 20);
const COUNTS = [1, 2, 4];
const KINDS = (process.env.SCALE_OUT_DATABASES ?? 'postgres,mariadb').split(',') as BenchDatabaseKind[];

interface PublisherStats {
  claims: number;
  rows: number;
  short: number;
  empty: number;
  errors: number;
}

/** One publisher: claim, "publish", mark sent, until no pending row is left. */
async function publisher(db: SeededDatabase, stats: PublisherStats): Promise<void> {
  const { ds, dialect } = db;
  const table = 'outbox_messages';
  for (;;) {
    const owner = randomUUID();
    let rows;
    try {
      rows = await dialect.claim(ds.manager, { table, owner, limit: BATCH, leaseMs: 60_000 });
    } catch {
      stats.errors++;
      continue;
    }
    if (rows.length > 0) stats.claims++;
    if (rows.length < BATCH) {
      const [{ n }] = await ds.query(`SELECT COUNT(*) AS n FROM outbox_messages WHERE status = 'pending'`);
      const pending = Number(n) - rows.length;
      if (rows.length === 0 && pending <= 0) return;
      if (pending > 0) {
        if (rows.length === 0) stats.empty++;
        else stats.short++;
      }
      if (rows.length === 0) {
        await sleep(2);
        continue;
      }
    }
    await sleep(PUBLISH_MS);
    stats.rows += await dialect.markSent(
      ds.manager,
      table,
      owner,
      rows.map((r) => r.seq),
    );
  }
}

/** `count` publishers, each on a DataSource of its own, draining ROWS pending rows of one table. */
async function round(kind: BenchDatabaseKind, db: SeededDatabase, count: number) {
  await db.ds.query(kind === 'postgres' ? 'TRUNCATE outbox_messages CASCADE' : 'DELETE FROM outbox_messages');
  await seedRows(db, ROWS, 'pending', 'bench.pending', true, randomUUID().slice(0, 8));
  await analyze(db);
  const publishers = await Promise.all(
    Array.from({ length: count }, async () => {
      const own = await createDatabaseHandle(db);
      return { db: own, stats: { claims: 0, rows: 0, short: 0, empty: 0, errors: 0 } as PublisherStats };
    }),
  );
  try {
    const started = performance.now();
    await Promise.all(publishers.map((p) => publisher(p.db, p.stats)));
    const seconds = (performance.now() - started) / 1000;
    const sum = (f: keyof PublisherStats) => publishers.reduce((a, p) => a + p.stats[f], 0);
    return {
      claimsPerS: sum('claims') / seconds,
      rowsPerS: sum('rows') / seconds,
      short: sum('short'),
      empty: sum('empty'),
      errors: sum('errors'),
      rows: sum('rows'),
    };
  } finally {
    for (const p of publishers) {
      await p.db.dialect.dispose(p.db.ds);
      await p.db.ds.destroy();
    }
  }
}

/** A second DataSource (and dialect instance, so its own relay pool on PostgreSQL) on the same database. */
async function createDatabaseHandle(db: SeededDatabase): Promise<SeededDatabase> {
  const ds = new DataSource({ ...db.ds.options, synchronize: false } as DataSourceOptions);
  await ds.initialize();
  const dialect = new (db.dialect.constructor as new () => SqlOutboxDialect)();
  return { kind: db.kind, ds, dialect, drop: async () => undefined };
}

const bench: Bench = async () => {
  const table: Array<Record<string, string | number>> = [];
  const fields: Record<string, number> = { rows: ROWS, publish_ms: PUBLISH_MS };
  for (const kind of KINDS) {
    const db = await createDatabase(kind);
    try {
      for (const count of COUNTS) {
        const r = await round(kind, db, count);
        if (r.rows !== ROWS) throw new Error(`scale-out: ${r.rows} of ${ROWS} rows marked sent`);
        table.push({
          database: kind,
          publishers: count,
          'claims/s': Math.round(r.claimsPerS),
          'rows/s': Math.round(r.rowsPerS),
          'short claims': r.short,
          'empty claims': r.empty,
          errors: r.errors,
        });
        Object.assign(fields, {
          [`${kind}_${count}_claims_per_s`]: Math.round(r.claimsPerS),
          [`${kind}_${count}_rows_per_s`]: Math.round(r.rowsPerS),
          [`${kind}_${count}_conflicts`]: r.short + r.empty + r.errors,
        });
      }
    } finally {
      await db.drop();
    }
  }
  return { table, fields };
};

export default bench;
