import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import type { AttemptHistoryOptions, ClaimedOutboxRow, OutboxFailure } from '../../outbox-dialect';
import type { PostgresOutboxDialect } from '../postgres.dialect';
import { claimStreamed, handBack, heldBackKeys, markStreamedSent, streamedRowStates } from './wal-rows.sql';
import type { WalTransaction } from './wal-transactions';

/** What became of the rows the relay published (the publisher's `BatchOutcome`, as far as the WAL relay reads it). */
export interface WalPublishOutcome {
  sent: ClaimedOutboxRow[];
  failures: Array<{ row: ClaimedOutboxRow; failure: OutboxFailure }>;
  unstarted: ClaimedOutboxRow[];
  expired?: ClaimedOutboxRow[];
}

/** What the WAL relay asks of the publisher: publishing rows the way a claimed batch is, and reporting after. */
export interface WalRelayHost {
  /** Publishes rows as one batch (each key's rows in order, the others concurrently) and reports the outcome. */
  publish(rows: ClaimedOutboxRow[]): Promise<WalPublishOutcome>;
  /** The outcome is written (failures under `owner`): events, logs, backoff streaks. */
  written(owner: string, outcome: WalPublishOutcome): void;
  /** The relay stopped streaming for good (the slot is gone): poll everything from now on. */
  fellBack(reason: string): void;
}

/** Settings of one outbox's WAL relay. */
export interface WalBatchSettings {
  table: string;
  /** Lease of the claim taken on failed rows before their failure is written. */
  leaseMs: number;
  deleteOnPublish: boolean;
  history?: AttemptHistoryOptions;
}

/** Counts of one streamed batch. */
export interface WalBatchResult {
  published: number;
  failed: number;
  handedBack: number;
}

/** Pauses (ms) before asking again for streamed rows not visible yet: about a quarter of a second in all. */
const VISIBILITY_RETRIES_MS = [2, 4, 8, 16, 32, 64, 128];

/**
 * The streamed rows `seqs` that are still the stream's (`streamedRowStates()`). A row not found is asked for again
 * after a short pause, a few times: its commit may not be visible yet to this session. One still missing then was
 * deleted (polling published it and `deleteOnPublish` removed it, or it was purged) and is skipped.
 */
async function openStreamedRows(
  dialect: PostgresOutboxDialect,
  manager: DataSource['manager'],
  table: string,
  seqs: string[],
): Promise<Set<string>> {
  const { open, found } = await streamedRowStates(dialect, manager, table, seqs);
  let missing = seqs.filter((seq) => !found.has(seq));
  for (const pause of VISIBILITY_RETRIES_MS) {
    if (missing.length === 0) break;
    await new Promise((resolve) => setTimeout(resolve, pause));
    const again = await streamedRowStates(dialect, manager, table, missing);
    for (const seq of again.open) open.add(seq);
    missing = missing.filter((seq) => !again.found.has(seq));
  }
  return open;
}

/**
 * Handles one batch of committed transactions from the stream: rows not due yet are polling's, and so are rows
 * polling already took or sent (`openStreamedRows()`, which asks again for a row whose commit is not visible yet);
 * rows of a key an earlier unsent row holds back are handed back to polling (per-key order); the rest are
 * published. Then, before
 * the caller acknowledges the batch's last commit to the slot: sent rows are marked (or deleted) in one statement,
 * failed ones claimed and written as a poll's failures are (retry with backoff, or dead), rows left unstarted or
 * expired handed back. A statement that fails throws: the caller ends the session and reads the batch again.
 */
export async function handleWalBatch(
  dataSource: DataSource,
  dialect: PostgresOutboxDialect,
  settings: WalBatchSettings,
  host: WalRelayHost,
  batch: readonly WalTransaction[],
): Promise<WalBatchResult> {
  const manager = dataSource.manager;
  const { table } = settings;
  const streamed: ClaimedOutboxRow[] = [];
  for (const tx of batch) for (const row of tx.rows) if (!tx.delayed.has(row.seq)) streamed.push(row);
  if (streamed.length === 0) return { published: 0, failed: 0, handedBack: 0 };
  // A slot not read for a while (every replica polling) replays rows polling has sent since: skip them.
  const open = await openStreamedRows(
    dialect,
    manager,
    table,
    streamed.map((r) => r.seq),
  );
  const due = streamed.filter((row) => open.has(row.seq));
  if (due.length === 0) return { published: 0, failed: 0, handedBack: 0 };
  const held = await heldBackKeys(dialect, manager, table, due);
  const back: string[] = [];
  const rows = due.filter((row) => {
    if (row.key === null || !held.has(row.key)) return true;
    back.push(row.seq);
    return false;
  });
  const outcome: WalPublishOutcome =
    rows.length > 0 ? await host.publish(rows) : { sent: [], failures: [], unstarted: [], expired: [] };
  for (const row of [...outcome.unstarted, ...(outcome.expired ?? [])]) back.push(row.seq);
  const owner = randomUUID();
  const sentSeqs = outcome.sent.map((r) => r.seq);
  await markStreamedSent(dialect, manager, table, sentSeqs, settings.deleteOnPublish);
  if (outcome.failures.length > 0) {
    const seqs = outcome.failures.map((f) => f.row.seq);
    const claimed = await claimStreamed(dialect, manager, table, owner, seqs, settings.leaseMs);
    const mine = outcome.failures.filter((f) => claimed.has(f.row.seq)).map((f) => f.failure);
    await dialect.markFailed(manager, table, owner, mine, settings.history);
  }
  await handBack(dialect, manager, table, back);
  host.written(owner, outcome);
  return { published: sentSeqs.length, failed: outcome.failures.length, handedBack: back.length };
}
