import { In } from 'typeorm';
import type { OutboxDatabase } from '../dialects/outbox-database';
import type { DeadRow } from '../dialects/outbox-dialect';
import { OutboxConfigurationError } from '../errors';
import type { OutboxRelayRegistry } from '../scheduling/outbox-relay.registry';
import { refuseInTransaction, runOnConnection } from '../transaction/transaction-runner';
import { describeError } from '../util/describe-error';
import { errorTypeOf } from '../util/error-type';
import { failureGroupOf } from './dead-letter-groups';
import { checkIds, checkLimit } from './dead-letter-query';
import { checkGroupFilter, CheckedFilter, scanDead } from './dead-letter-scan';
import type {
  DeadLetterDryRun,
  DeadLetterDryRunOptions,
  DeadLetterTrialError,
  DeadLetterTrialResult,
} from './dead-letter-trial.types';
import type { DeadLetterFilter } from './dead-letter.model';

/** Rows a dry run tries when no `limit` is given. */
const DEFAULT_TRIAL_LIMIT = 100;

/** What was thrown, as a dry run reports it: its class and its redacted message, never a stack. */
export function trialError(error: unknown): DeadLetterTrialError {
  return { errorClass: errorTypeOf(error), message: describeError(error) };
}

/** The selection of `dryRun()` — ids, a filter (with a group), or all — as one filter, checked like `requeue()`'s. */
function checkTrialSelection(selection: readonly string[] | DeadLetterFilter | undefined): CheckedFilter {
  if (selection === undefined) return { filter: {} };
  if (Array.isArray(selection) || typeof selection !== 'object' || selection === null) {
    return { filter: { messageIds: checkIds('dryRun', selection) } };
  }
  return checkGroupFilter('dryRun', selection);
}

/**
 * Tries the newest `limit` dead rows of a selection (see `OutboxDeadLetters.dryRun()`), one after the other, each
 * through the trier registered for its destination; writes nothing. A row requeued or purged between the read and
 * its turn is left out.
 */
export async function dryRunDeadLetters(
  database: OutboxDatabase,
  relays: OutboxRelayRegistry,
  selection: readonly string[] | DeadLetterFilter | undefined,
  options: DeadLetterDryRunOptions = {},
): Promise<DeadLetterDryRun> {
  refuseInTransaction(database.dataSource, 'OutboxDeadLetters.dryRun()');
  const { filter, group } = checkTrialSelection(selection);
  const limit = checkLimit('dryRun', options?.limit, DEFAULT_TRIAL_LIMIT);
  const { dataSource, entities } = database;
  const picked: DeadRow[] = [];
  let complete = true;
  await runOnConnection(dataSource, (m) =>
    scanDead(database, m, filter, undefined, (row) => {
      if (group !== undefined && failureGroupOf(row.lastError).group !== group) return true;
      if (picked.length === limit) {
        complete = false;
        return false;
      }
      picked.push(row);
      return true;
    }),
  );
  const rows =
    picked.length === 0
      ? []
      : await runOnConnection(dataSource, (m) =>
          m.getRepository(entities.message).find({ where: { seq: In(picked.map((r) => r.seq)) } }),
        );
  const bySeq = new Map(rows.map((r) => [String(r.seq), r]));
  const results: DeadLetterTrialResult[] = [];
  for (const { seq } of picked) {
    const row = bySeq.get(seq);
    if (!row || row.status !== 'dead') continue;
    const { messageId, pattern, key, destination, attempts, payload, headers } = row;
    const expiresAt = row.expiresAt ? row.expiresAt.getTime() : null;
    const result: DeadLetterTrialResult = { messageId, pattern, key, destination, attempts, ok: false, targets: [] };
    try {
      const trier = relays.trierOf(destination);
      if (!trier) {
        throw new OutboxConfigurationError(
          `Nothing in this process tries rows of the destination '${destination}': get OutboxDeadLetters from the ` +
            'app, where OutboxModule provides its publisher.',
        );
      }
      const row = { seq, messageId, pattern, key, destination, payload, headers, attempts, expiresAt };
      result.targets = await trier.tryRow(row);
      result.ok = result.targets.length > 0 && result.targets.every((t) => t.ok);
    } catch (error) {
      result.error = trialError(error);
    }
    results.push(result);
  }
  const ok = results.filter((r) => r.ok).length;
  return { results, tried: results.length, ok, failed: results.length - ok, complete };
}
