import type { EntityManager } from 'typeorm';
import type {
  AttemptHistoryOptions,
  DeadRowFilter,
  OutboxDialect,
  OutboxFailure,
} from '../../src/dialects/outbox-dialect';
import { SqliteOutboxDialect } from '../../src/dialects/sqlite/sqlite.dialect';
import { DATABASE_LABEL } from '../helpers/databases';
import { DialectSubject, useDialectSubject } from './contract-subject';
import { DIALECT_CHECKS, failingChecks } from './dialect-contract';

/** Rewrites the claimable-rows condition of the SQLite dialect, failing loudly when the text to change is gone. */
function rewriteClaimable(edit: (where: string, now: string, q: (c: string) => string) => string) {
  return class extends SqliteOutboxDialect {
    protected claimableWhere(table: string, m = 'm'): string {
      const where = super.claimableWhere(table, m);
      const changed = edit(where, this.nowMs, (c) => `${m}.${this.quote(c)}`);
      if (changed === where) throw new Error('The broken dialect no longer changes claimableWhere(): update this test');
      return changed;
    }
  };
}

/** Claims rows that are not due yet. */
const IgnoresDueTime = rewriteClaimable((where, now, c) => where.replace(`${c('available_at')} <= ${now} AND `, ''));

/** Claims rows whose lease is still running. */
const IgnoresLease = rewriteClaimable((where, now, c) =>
  where.replace(`(${c('claimed_until')} IS NULL OR ${c('claimed_until')} < ${now})`, '1 = 1'),
);

/** Claims a key's rows behind an unsent head. */
const IgnoresKeyOrder = rewriteClaimable((where) => where.slice(0, where.indexOf(' AND (m."ordering_key" IS NULL')));

/** One order per key whatever the destinations (as before per-destination rows). */
const IgnoresDestinations = rewriteClaimable((where) =>
  where.replace(
    `(e."destination" = '' AND m."destination" <> '' OR (e."destination" = m."destination" OR m."destination" = '') AND `,
    '(',
  ),
);

/** Lets a one-destination row pass an earlier every-destination row that is itself held back by another destination. */
const PassesHeldBackAllRow = rewriteClaimable((where) =>
  where.replace(`(e."destination" = '' AND m."destination" <> '' OR `, '(1 = 0 OR '),
);

/** Lets an expired earlier row of a key hold the key back, as a dead or retrying head does. */
class ExpiredHeadBlocks extends SqliteOutboxDialect {
  protected expiredUnheld(): string {
    return '(1 = 0)';
  }
}

/**
 * Replaces rows whatever their status and id: its statements lack the condition that the rows are still dead with
 * the original id, so a second edit (or one racing a requeue) would make another copy.
 */
class ReplaceIgnoresStatus extends SqliteOutboxDialect {
  async execute(manager: EntityManager, sql: string, params: unknown[] = [], options = {}) {
    const guard = ` AND "status" = 'dead' AND "message_id" = ?`;
    if (!sql.includes(guard)) return super.execute(manager, sql, params, options);
    return super.execute(manager, sql.replace(guard, ''), params.slice(0, -1), options);
  }
}

/** Marks rows sent whoever holds the claim (no fencing). */
class MarkSentIgnoresOwner extends SqliteOutboxDialect {
  async markSent(manager: EntityManager, table: string, _owner: string, seqs: readonly string[]): Promise<number> {
    const owners: Array<{ owner: string }> = await manager.query(
      `SELECT DISTINCT claimed_by AS owner FROM ${table} WHERE seq IN (${seqs.join(', ')}) AND claimed_by IS NOT NULL`,
    );
    let marked = 0;
    for (const { owner } of owners) marked += await super.markSent(manager, table, owner, seqs);
    return marked;
  }
}

/** Gives claims back but keeps the attempt counted. */
class ReleaseKeepsAttempt extends SqliteOutboxDialect {
  async release(manager: EntityManager, table: string, owner: string, seqs: readonly string[]): Promise<number> {
    const released = await super.release(manager, table, owner, seqs);
    await manager.query(
      `UPDATE ${table} SET attempts = attempts + 1 WHERE seq IN (${seqs.join(', ')}) AND claimed_by IS NULL`,
    );
    return released;
  }
}

/** Deletes every expired sent row at once, whatever the limit. */
class CleanupIgnoresLimit extends SqliteOutboxDialect {
  deleteExpiredSent(manager: EntityManager, table: string, retentionMs: number): Promise<number> {
    return super.deleteExpiredSent(manager, table, retentionMs, 1_000_000);
  }
}

/** Counts dead rows as pending too. */
class StatsMiscountsDead extends SqliteOutboxDialect {
  async stats(manager: EntityManager, table: string) {
    const stats = await super.stats(manager, table);
    return { ...stats, pending: stats.pending + stats.dead };
  }
}

/** Does not escape the quote character inside an identifier. */
class QuoteWithoutEscaping extends SqliteOutboxDialect {
  quote(identifier: string): string {
    return `"${identifier}"`;
  }
}

/** Keeps every attempt of a message, whatever `history.limit` says. */
class HistoryIgnoresLimit extends SqliteOutboxDialect {
  markFailed(
    m: EntityManager,
    table: string,
    owner: string,
    failures: readonly OutboxFailure[],
    history?: AttemptHistoryOptions,
  ) {
    return super.markFailed(m, table, owner, failures, history && { ...history, limit: 1000 });
  }
}

/** Writes the history of every failure given, also of rows whose claim this owner no longer holds (no fencing). */
class HistoryIgnoresOwner extends SqliteOutboxDialect {
  async markFailed(
    m: EntityManager,
    table: string,
    owner: string,
    failures: readonly OutboxFailure[],
    history?: AttemptHistoryOptions,
  ) {
    const changed = await super.markFailed(m, table, owner, failures, history);
    if (changed === 0 && history) await this.recordAttempts(m, table, owner, failures, new Map(), history);
    return changed;
  }
}

/** Continues after a position with `dead_at <` only: rows that died in the same millisecond are skipped. */
class KeysetDropsTies extends SqliteOutboxDialect {
  protected keysetBefore(deadAt: string): string {
    return `${this.quote('dead_at')} < ${deadAt}`;
  }
}

/** Applies a filter to every row, not only to dead ones. */
class FilterIgnoresStatus extends SqliteOutboxDialect {
  protected deadWhere(filter: DeadRowFilter) {
    const { where, params } = super.deadWhere(filter);
    const changed = where.replace(`${this.quote('status')} = 'dead'`, '1 = 1');
    if (changed === where) throw new Error('The broken dialect no longer changes deadWhere(): update this test');
    return { where: changed, params };
  }
}

const check = (prefix: string) => {
  const found = DIALECT_CHECKS.filter((c) => c.name.startsWith(prefix)).map((c) => c.name);
  if (found.length !== 1) throw new Error(`No single contract check starts with "${prefix}"`);
  return found[0];
};

/** Each broken dialect, and exactly the checks that must catch it. */
const broken: Array<{ name: string; dialect: new () => OutboxDialect; caughtBy: string[] }> = [
  {
    // A retry's wait and a delayed row are due times too.
    name: 'claim() ignores the due time',
    dialect: IgnoresDueTime,
    caughtBy: [
      check('claim() takes only rows that are due'),
      check("claim() keeps each key's order:"),
      check("claim() keeps each key's order per destination"),
      check('claim(): a row for every destination'),
      check('claim(): an expired earlier row'),
      check('markFailed() schedules'),
      check('requeueDead() makes'),
    ],
  },
  {
    // Rows claimed earlier in a check are claimed again.
    name: 'claim() ignores the lease',
    dialect: IgnoresLease,
    caughtBy: [
      check('claim() takes only rows that are due'),
      check('claim() takes at most `limit` rows'),
      check('claim() sets a lease'),
      check("claim() keeps each key's order:"),
      check("claim() keeps each key's order per destination"),
      check('claim(): an expired earlier row'),
      check('requeueDead() makes'),
    ],
  },
  {
    name: "claim() ignores a key's order",
    dialect: IgnoresKeyOrder,
    caughtBy: [
      check("claim() keeps each key's order:"),
      check("claim() keeps each key's order per destination"),
      check('claim(): a row for every destination'),
      check('claim(): an expired earlier row'),
    ],
  },
  {
    name: 'claim() ignores the destinations',
    dialect: IgnoresDestinations,
    caughtBy: [check("claim() keeps each key's order per destination"), check('claim(): a row for every destination')],
  },
  {
    name: 'claim() lets a row pass an earlier every-destination row held back elsewhere',
    dialect: PassesHeldBackAllRow,
    caughtBy: [check('claim(): a row for every destination')],
  },
  {
    name: 'claim() lets an expired head block its key',
    dialect: ExpiredHeadBlocks,
    caughtBy: [check('claim(): an expired earlier row')],
  },
  { name: 'markSent() ignores the owner', dialect: MarkSentIgnoresOwner, caughtBy: [check('markSent()')] },
  { name: 'replaceDead() ignores the status', dialect: ReplaceIgnoresStatus, caughtBy: [check('replaceDead()')] },
  { name: 'release() keeps the attempt counted', dialect: ReleaseKeepsAttempt, caughtBy: [check('release()')] },
  {
    name: 'deleteExpiredSent() ignores the limit',
    dialect: CleanupIgnoresLimit,
    caughtBy: [check('deleteExpiredSent()')],
  },
  { name: 'stats() counts dead rows as pending', dialect: StatsMiscountsDead, caughtBy: [check('stats()')] },
  { name: 'quote() does not escape', dialect: QuoteWithoutEscaping, caughtBy: [check('quote()')] },
  { name: 'history ignores its limit', dialect: HistoryIgnoresLimit, caughtBy: [check('markFailed() with history')] },
  { name: 'history ignores the owner', dialect: HistoryIgnoresOwner, caughtBy: [check('markFailed() with history')] },
  { name: 'keyset drops ties', dialect: KeysetDropsTies, caughtBy: [check('listDead() lists')] },
  {
    name: 'dead-row filter ignores the status',
    dialect: FilterIgnoresStatus,
    caughtBy: [
      check('requeueDead() makes'),
      check('purgeDead() deletes'),
      check('listDead() lists'),
      check('listDead() and countDead()'),
      check('requeueDead() and purgeDead() by filter'),
    ],
  },
];

describe(`The OutboxDialect contract catches broken dialects (on ${DATABASE_LABEL.sqlite})`, () => {
  const subject = useDialectSubject('sqlite');
  const withDialect = (dialect: OutboxDialect): DialectSubject => ({ ...subject(), dialect });

  it('the correct SQLite dialect passes every check (the baseline the broken ones are compared with)', async () => {
    expect(await failingChecks(withDialect(new SqliteOutboxDialect()))).toEqual([]);
  });

  it.each(broken)('a dialect whose $name fails exactly the checks that cover it', async ({ dialect, caughtBy }) => {
    expect(await failingChecks(withDialect(new dialect()))).toEqual(
      DIALECT_CHECKS.map((c) => c.name).filter((n) => caughtBy.includes(n)),
    );
  });
});
