import type { ClientProxy } from '@nestjs/microservices';
import type { OutboxDestinations } from '../destinations/outbox-destinations';
import type { ClaimedOutboxRow, OutboxFailure } from '../dialects/outbox-dialect';
import { type BatchOutcome, timeLeft } from './publish-pass';

/**
 * Publishes a claimed batch and collects its outcome: which rows start and in which order (`publishInKeyOrder()`),
 * each sent row with how long it took until the broker confirmed it, each failure with what it means for its row
 * (`failureOf`, which may give the duration itself), and the rows left unstarted. A row whose expiry has passed
 * when its turn comes is not published but collected as expired, and the rest of its key goes on.
 */
export async function publishBatchRows(
  rows: ClaimedOutboxRow[],
  mayStart: () => boolean,
  publish: (row: ClaimedOutboxRow) => Promise<void>,
  failureOf: (row: ClaimedOutboxRow, error: unknown) => OutboxFailure,
): Promise<BatchOutcome> {
  const timings = new Map<string, { durationMs: number; confirmedAt: number }>();
  const outcome: BatchOutcome = { sent: [], failures: [], unstarted: [], expired: [], timings };
  await publishInKeyOrder(rows, outcome, mayStart, async (row) => {
    const left = timeLeft(row);
    if (left !== undefined && left <= 0) {
      outcome.expired!.push(row);
      return true;
    }
    const started = performance.now();
    try {
      await publish(row);
      const confirmedAt = performance.now();
      timings.set(row.seq, { durationMs: confirmedAt - started, confirmedAt });
      outcome.sent.push(row);
      return true;
    } catch (error) {
      const failure = failureOf(row, error);
      failure.durationMs ??= performance.now() - started;
      outcome.failures.push({ row, failure });
      return false;
    }
  });
  return outcome;
}

/**
 * Runs `attempt` over a claimed batch: unkeyed rows all at once, the rows of each key and destination in sequence
 * (a failed attempt stops its key at its destination; the rest of that chain is left unstarted), different keys and
 * destinations in parallel. A key with a row for every destination (`''`) in the batch is one chain. A row is
 * started only while `mayStart()` says so; the others are collected as unstarted. `attempt` records sent rows and
 * failures in `outcome` and resolves with success.
 */
export async function publishInKeyOrder(
  rows: ClaimedOutboxRow[],
  outcome: BatchOutcome,
  mayStart: () => boolean,
  attempt: (row: ClaimedOutboxRow) => Promise<boolean>,
): Promise<void> {
  const chains = new Map<string, ClaimedOutboxRow[]>();
  const work: Promise<unknown>[] = [];
  let keysForAll: Set<string> | undefined;
  for (const row of rows) {
    if (row.key !== null && row.destination === '') (keysForAll ??= new Set()).add(row.key);
  }
  for (const row of rows) {
    if (row.key === null) {
      if (mayStart()) work.push(attempt(row));
      else outcome.unstarted.push(row);
    } else {
      const chainId =
        row.destination === '' || keysForAll?.has(row.key) ? row.key : `${row.key}\u0000${row.destination}`;
      const chain = chains.get(chainId);
      if (chain) chain.push(row);
      else chains.set(chainId, [row]);
    }
  }
  for (const chain of chains.values()) {
    work.push(
      (async () => {
        for (let i = 0; i < chain.length; i++) {
          if (!mayStart()) {
            outcome.unstarted.push(...chain.slice(i));
            return;
          }
          if (!(await attempt(chain[i]))) {
            outcome.unstarted.push(...chain.slice(i + 1));
            return;
          }
        }
      })(),
    );
  }
  await Promise.all(work);
}

/**
 * Publishes rows the WAL relay streamed, as a claimed batch is (`publishBatchRows()`), to the primary broker's
 * client; every row may start (they hold no lease: they are never claimed).
 */
export async function publishStreamed(
  destinations: OutboxDestinations,
  rows: ClaimedOutboxRow[],
  publish: (client: ClientProxy | undefined, row: ClaimedOutboxRow) => Promise<void>,
  failureOf: (row: ClaimedOutboxRow, error: unknown) => OutboxFailure,
): Promise<BatchOutcome> {
  await destinations.brokers.ready();
  const primary = destinations.brokers.primary;
  const client = primary && destinations.brokers.clientOf(primary);
  return publishBatchRows(
    rows,
    () => true,
    (row) => publish(client, row),
    failureOf,
  );
}
