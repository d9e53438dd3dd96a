import type { EntityManager } from 'typeorm';
import type { OutboxDatabase } from '../dialects/outbox-database';
import type { DeadRow, DeadRowFilter, DeadRowPosition } from '../dialects/outbox-dialect';
import { checkGroupId } from './dead-letter-groups';
import { checkFilter } from './dead-letter-query';

/** Dead rows read per statement while scanning (grouping, a group's selection, a dry run). */
export const SCAN_CHUNK = 1000;

/** A checked filter, and the failure group it also asks for. */
export interface CheckedFilter {
  filter: DeadRowFilter;
  group?: string;
}

/** A filter with an optional failure group: the group checked apart, the rest as `checkFilter()` checks it. */
export function checkGroupFilter(method: string, raw: unknown): CheckedFilter {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw) || !('group' in raw)) {
    return { filter: checkFilter(method, raw, ['group']) };
  }
  const { group, ...rest } = raw as Record<string, unknown>;
  const filter = checkFilter(method, rest, ['group']);
  return group === undefined ? { filter } : { filter, group: checkGroupId(method, group) };
}

/**
 * Reads the dead rows matching `filter`, newest death first from `after`, in keyset pages of `SCAN_CHUNK`, until
 * `visit` returns false. Resolves true when every row was visited.
 */
export async function scanDead(
  database: OutboxDatabase,
  manager: EntityManager,
  filter: DeadRowFilter,
  after: DeadRowPosition | undefined,
  visit: (row: DeadRow) => boolean,
): Promise<boolean> {
  const { dialect, table } = database;
  let position = after;
  for (;;) {
    const rows = await dialect.listDead(manager, table, { filter, after: position, limit: SCAN_CHUNK });
    for (const row of rows) if (!visit(row)) return false;
    if (rows.length < SCAN_CHUNK) return true;
    const last = rows[rows.length - 1];
    position = { deadAt: last.deadAt, seq: last.seq };
  }
}
