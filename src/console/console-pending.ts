import type { OutboxDatabase } from '../dialects/outbox-database';
import { runOnConnection } from '../transaction/transaction-runner';
import { redactSecrets } from '../util/redact-secrets';
import { badRequest } from './console-problem';

/** Where an unsent message stands: waiting for a publish pass, or claimed by one whose lease has not run out. */
export type ConsolePendingState = 'pending' | 'in-flight';

/** One unsent row (one destination of a message) as `GET <path>/api/pending` lists it: no payload, no headers. */
export interface ConsolePendingMessage {
  messageId: string;
  pattern: string;
  key: string | null;
  destination: string;
  state: ConsolePendingState;
  /** Counted failed attempts so far. */
  attempts: number;
  /** Epoch milliseconds. */
  createdAt: number;
  /** When it is due (a retry's or a delayed message's time). */
  availableAt: number;
  /** Milliseconds since it was written, on this process's clock. */
  ageMs: number;
  /** The publish pass holding its lease (the claim's owner token), or null when none holds one now. */
  leaseOwner: string | null;
  /** When that lease runs out, epoch milliseconds; null without one. */
  leaseUntil: number | null;
  /** The last failed attempt's error, redacted of credentials; null when none failed yet. */
  lastError: string | null;
}

/** One page of `GET <path>/api/pending`, oldest written first. */
export interface ConsolePendingPage {
  items: ConsolePendingMessage[];
  /** Pass it as `cursor` for the next page (same query); null on the last page. */
  nextCursor: string | null;
}

const QUERY_FIELDS = ['pattern', 'key', 'state', 'limit', 'cursor'];

/**
 * Reads the unsent rows of an outbox — pending or in flight — oldest written first, in keyset pages on `seq`
 * (filters: exact `pattern`, exact `key`, `state`). Read-only; every bad parameter is a 400.
 */
export async function readPendingPage(
  database: OutboxDatabase,
  raw: Record<string, unknown>,
): Promise<ConsolePendingPage> {
  const unknown = Object.keys(raw).filter((k) => !QUERY_FIELDS.includes(k));
  if (unknown.length > 0) {
    throw badRequest(`Unknown parameter ${unknown.join(', ')}: use only ${QUERY_FIELDS.join(', ')}.`);
  }
  const text = (name: string) => {
    const value = raw[name];
    if (value === undefined || value === '') return undefined;
    if (typeof value !== 'string' || value.length > 255) {
      throw badRequest(`"${name}" must be one string of at most 255 characters; leave it out to match any.`);
    }
    return value;
  };
  const pattern = text('pattern');
  const key = text('key');
  const state = text('state');
  if (state !== undefined && state !== 'pending' && state !== 'in-flight') {
    throw badRequest('"state" must be "pending" (not claimed) or "in-flight" (claimed); leave it out for both.');
  }
  const limitText = raw.limit;
  const limit = limitText === undefined ? 50 : Number(limitText);
  if (typeof limitText !== 'undefined' && (typeof limitText !== 'string' || !/^\d+$/.test(limitText))) {
    throw badRequest('"limit" must be an integer from 1 to 500; leave it out for 50.');
  }
  if (!Number.isInteger(limit) || limit < 1 || limit > 500) {
    throw badRequest('"limit" must be an integer from 1 to 500; leave it out for 50.');
  }
  const after = decodePendingCursor(raw.cursor);

  const now = Date.now();
  const rows = await runOnConnection(database.dataSource, (manager) => {
    const qb = manager
      .getRepository(database.entities.message)
      .createQueryBuilder('m')
      .where('m.status = :status', { status: 'pending' });
    if (pattern !== undefined) qb.andWhere('m.pattern = :pattern', { pattern });
    if (key !== undefined) qb.andWhere('m.key = :key', { key });
    if (state === 'in-flight') qb.andWhere('m.claimedUntil >= :now', { now });
    if (state === 'pending') qb.andWhere('(m.claimedUntil IS NULL OR m.claimedUntil < :now)', { now });
    if (after !== undefined) qb.andWhere('m.seq > :after', { after });
    return qb
      .orderBy('m.seq', 'ASC')
      .limit(limit + 1)
      .getMany();
  });
  const items = rows.slice(0, limit).map((row): ConsolePendingMessage => {
    const leaseUntil = row.claimedUntil ? row.claimedUntil.getTime() : null;
    const leased = leaseUntil !== null && leaseUntil >= now;
    return {
      messageId: row.messageId,
      pattern: row.pattern,
      key: row.key,
      destination: row.destination,
      state: leased ? 'in-flight' : 'pending',
      attempts: row.attempts,
      createdAt: row.createdAt.getTime(),
      availableAt: row.availableAt.getTime(),
      ageMs: Math.max(0, now - row.createdAt.getTime()),
      leaseOwner: leased ? row.claimedBy : null,
      leaseUntil: leased ? leaseUntil : null,
      lastError: row.lastError === null ? null : redactSecrets(row.lastError),
    };
  });
  const last = rows.length > limit ? rows[limit - 1] : undefined;
  return { items, nextCursor: last ? Buffer.from(`p1:${last.seq}`, 'utf8').toString('base64url') : null };
}

function decodePendingCursor(cursor: unknown): string | undefined {
  if (cursor === undefined || cursor === '') return undefined;
  const match = typeof cursor === 'string' ? /^p1:(\d{1,20})$/.exec(Buffer.from(cursor, 'base64url').toString()) : null;
  if (!match) throw badRequest('"cursor" is not one this API returned: pass the nextCursor of the previous page.');
  return match[1];
}
