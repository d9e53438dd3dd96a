/**
 * The two relays every relay benchmark compares, whatever the broker: a hand-written one (the reference a relay is
 * measured against) and the library's publisher in an app, each draining the filled `outbox_messages` table.
 */
import type { INestApplicationContext } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { pgClient, sleep } from './relay-support';

/** The columns of a pending row a hand-written relay publishes. */
export interface PendingBenchRow {
  seq: string;
  message_id: string;
  pattern: string;
  payload: string;
}

/** Rows a hand-written relay claims per transaction. */
export const HAND_WRITTEN_BATCH = 500;

/**
 * A hand-written relay: claim 500 pending rows `FOR UPDATE SKIP LOCKED`, `publish` them (resolving once the broker
 * confirmed them all), one UPDATE by id list, commit; until no pending row is left. Resolves with its msg/s.
 */
export async function handWrittenRelay(
  database: string,
  publish: (rows: PendingBenchRow[]) => Promise<void>,
): Promise<number> {
  const pg = await pgClient(database);
  try {
    const started = performance.now();
    let moved = 0;
    for (;;) {
      await pg.query('BEGIN');
      const { rows } = await pg.query<PendingBenchRow>(
        `SELECT seq, message_id, pattern, payload FROM outbox_messages WHERE status = 'pending' ORDER BY seq LIMIT ${HAND_WRITTEN_BATCH} FOR UPDATE SKIP LOCKED`,
      );
      if (rows.length === 0) {
        await pg.query('COMMIT');
        break;
      }
      await publish(rows);
      await pg.query(
        `UPDATE outbox_messages SET status = 'sent', sent_at = (extract(epoch from clock_timestamp()) * 1000)::bigint WHERE seq = ANY($1::bigint[])`,
        [rows.map((r) => r.seq)],
      );
      await pg.query('COMMIT');
      moved += rows.length;
    }
    return moved / ((performance.now() - started) / 1000);
  } finally {
    await pg.end();
  }
}

/**
 * The library's publisher: `start()` builds an app whose publisher drains the table on bootstrap. Timed from before
 * the app starts (connections and start-up checks count against the library) to the last `sent_at`; msg/s.
 */
export async function libraryDrain(database: string, start: () => Promise<INestApplicationContext>): Promise<number> {
  const pg = await pgClient(database);
  try {
    const { rows } = await pg.query(`SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint AS t`);
    const started = Number(rows[0].t);
    const app = await start();
    try {
      for (;;) {
        await sleep(200);
        const { rows: left } = await pg.query(
          `SELECT count(*)::int AS n FROM outbox_messages WHERE status = 'pending'`,
        );
        if (left[0].n === 0) break;
      }
    } finally {
      await app.close();
    }
    const { rows: end } = await pg.query(
      `SELECT max(sent_at)::bigint AS t, count(*)::int AS n FROM outbox_messages WHERE status = 'sent'`,
    );
    return Number(end[0].n) / ((Number(end[0].t) - started) / 1000);
  } finally {
    await pg.end();
  }
}
