import type { DataSource } from 'typeorm';
import type { IdempotencyService } from '../idempotency/idempotency.service';
import { runStatements } from '../transaction/held-transaction';
import { runRolledBack } from '../transaction/transaction-runner';

/** The record a dry run takes: its scope, key and fingerprint, as a real run would write it. */
export interface TrialRecord {
  scope: string;
  key: string;
  fingerprint: string;
}

/**
 * A dry run of one handler (`OutboxDeadLetters.dryRun()`): in a transaction of the outbox's DataSource that is always
 * rolled back (`runRolledBack()`), takes `record` with the same locks as a real run, then runs `work`. Resolves
 * `skipped` when a committed record shows an earlier run applied it (a requeue would skip it too), `ran` when `work`
 * ran to its end; rejects with what `work` threw, or `inFlight()` while another transaction holds the record.
 */
export function tryUnderRecord(
  dataSource: DataSource,
  idempotency: IdempotencyService,
  record: TrialRecord,
  inFlight: () => Error,
  work: () => Promise<unknown>,
): Promise<'ran' | 'skipped'> {
  return runRolledBack(dataSource, async (manager) => {
    const { store, defaults } = idempotency;
    const taking = await store.take(record.scope, record.key, record.fingerprint, defaults);
    try {
      const take = taking.outcome(await runStatements(manager, taking.statements));
      if (take.kind === 'stored') return 'skipped';
      if (take.kind === 'in-flight') throw inFlight();
      await work();
      return 'ran';
    } finally {
      // After a failed statement PostgreSQL refuses more in this transaction; the rollback ends its locks anyway.
      await runStatements(manager, taking.release).catch(() => undefined);
    }
  });
}
