import type { OutboxDatabase } from '../dialects/outbox-database';
import { runOnConnection } from '../transaction/transaction-runner';
import { redactSecrets } from '../util/redact-secrets';
import { badRequest, notFound } from './console-problem';

/** Where an idempotency record stands: its request still running, answered, or past its expiry. */
export type ConsoleKeyState = 'in-progress' | 'completed' | 'expired';

/** One idempotency record as `GET <path>/api/keys` shows it. */
export interface ConsoleKeyRecord {
  /** The scope the key was recorded under (route, user or tenant, as the app's idempotency options make it). */
  scope: string;
  key: string;
  state: ConsoleKeyState;
  /** The stored response's HTTP status; null while in progress. */
  responseStatus: number | null;
  /** Epoch milliseconds. */
  createdAt: number;
  expiresAt: number;
  /**
   * The stored response body and headers, redacted of credentials — only with the console option
   * `showStoredResponses: true`; otherwise never read from the database and left out.
   */
  responseBody?: string | null;
  responseHeaders?: string | null;
}

/** Most records one lookup returns (one key under several scopes). */
const MAX_RECORDS = 50;

/**
 * The idempotency records of one key as the client sent it, in every scope (or the one given), newest first — a
 * plain read of the outbox's idempotency table. 404 when the DataSource has no idempotency table.
 */
export async function lookUpKey(
  database: OutboxDatabase,
  raw: Record<string, unknown>,
  showStoredResponses: boolean,
): Promise<{ records: ConsoleKeyRecord[] }> {
  const unknown = Object.keys(raw).filter((k) => k !== 'key' && k !== 'scope');
  if (unknown.length > 0) throw badRequest(`Unknown parameter ${unknown.join(', ')}: use only key and scope.`);
  const { scope } = raw;
  const key = unquote(raw.key);
  if (typeof key !== 'string' || key.length === 0 || key.length > 255) {
    throw badRequest('"key" must be the idempotency key as the client sent it (1 to 255 characters).');
  }
  if (scope !== undefined && (typeof scope !== 'string' || scope.length === 0 || scope.length > 255)) {
    throw badRequest('"scope" must be one scope of at most 255 characters; leave it out for every scope.');
  }
  const entity = database.entities.idempotencyRecord;
  if (!database.dataSource.hasMetadata(entity)) {
    throw notFound(
      `The outbox '${database.name}' has no idempotency table: this app does not use IdempotencyModule on it.`,
    );
  }
  const columns = ['r.id', 'r.scope', 'r.key', 'r.responseStatus', 'r.createdAt', 'r.expiresAt'];
  if (showStoredResponses) columns.push('r.responseBody', 'r.responseHeaders');
  const rows = await runOnConnection(database.dataSource, (manager) => {
    const qb = manager.getRepository(entity).createQueryBuilder('r').select(columns).where('r.key = :key', { key });
    if (scope !== undefined) qb.andWhere('r.scope = :scope', { scope });
    return qb.orderBy('r.id', 'DESC').limit(MAX_RECORDS).getMany();
  });
  const now = Date.now();
  return {
    records: rows.map((row) => {
      const expiresAt = row.expiresAt.getTime();
      const record: ConsoleKeyRecord = {
        scope: row.scope,
        key: row.key,
        state: expiresAt <= now ? 'expired' : row.responseStatus === null ? 'in-progress' : 'completed',
        responseStatus: row.responseStatus,
        createdAt: row.createdAt.getTime(),
        expiresAt,
      };
      if (showStoredResponses) {
        record.responseBody = row.responseBody === null ? null : redactSecrets(row.responseBody);
        record.responseHeaders = row.responseHeaders === null ? null : redactSecrets(row.responseHeaders);
      }
      return record;
    }),
  };
}

/**
 * The key as stored: a key pasted as the client's header carried it in RFC 8941 quotes (`"abc"`) is stored without
 * them (and without the backslash escapes); any other text is looked up as it is.
 */
export function unquote(key: unknown): unknown {
  if (typeof key !== 'string') return key;
  const quoted = /^"((?:[^"\\]|\\["\\])*)"$/.exec(key);
  return quoted ? quoted[1].replace(/\\(["\\])/g, '$1') : key;
}
