import type { PoolClient } from 'pg';

/** Any character `escapeLiteral` of `pg` changes: a quote or a backslash. */
const NEEDS_ESCAPING = /['\\]/;

/**
 * `text` as a PostgreSQL string literal, exactly as the `pg` client's `escapeLiteral` writes it. That function
 * builds its result one character at a time (a string allocation per character); a text without a quote or a
 * backslash (every message id, scope and fingerprint the hot path sees) comes out of it merely wrapped in quotes,
 * so that case is answered here without the walk. Anything else goes to the driver.
 */
export function pgLiteral(client: Pick<PoolClient, 'escapeLiteral'>, text: string): string {
  return NEEDS_ESCAPING.test(text) ? client.escapeLiteral(text) : `'${text}'`;
}
