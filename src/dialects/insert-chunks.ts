import type { NewOutboxRow } from './outbox-dialect';

/** How large one multi-row INSERT of outbox rows may grow. */
export interface InsertChunkLimits {
  /** Bind parameters one statement may carry on the database (see each dialect's `maxBindParameters`). */
  maxParameters: number;
  /** Bytes of payload and headers text one statement carries at most; a single larger row goes alone. */
  maxBytes: number;
}

/**
 * Bind parameters the INSERT uses for `row`: id, pattern, payload, headers, key, plus the due time and the expiry
 * when given, the destination when not `''` and the cause's scope and key when it has one.
 */
export function insertParameters(row: NewOutboxRow): number {
  const expiry = row.expiresAt !== undefined || row.expiresIn !== undefined ? 1 : 0;
  const cause = row.cause ? 2 : 0;
  return 5 + (row.availableAt !== undefined || row.delay ? 1 : 0) + expiry + (row.destination ? 1 : 0) + cause;
}

/**
 * Splits `rows` into consecutive chunks, in order, each within `limits`: every statement stays under the
 * database's limit on bind parameters and carries a bounded amount of text (MySQL/MariaDB refuse a statement
 * larger than `max_allowed_packet`, 16 MiB by default on MariaDB, 64 MiB on MySQL 8).
 */
export function insertChunks(rows: readonly NewOutboxRow[], limits: InsertChunkLimits): NewOutboxRow[][] {
  const chunks: NewOutboxRow[][] = [];
  let chunk: NewOutboxRow[] = [];
  let parameters = 0;
  let bytes = 0;
  for (const row of rows) {
    const rowParameters = insertParameters(row);
    // UTF-16 length: a cheap bound within 3× of the UTF-8 size, good enough to keep statements small.
    const rowBytes = row.payload.length + (row.headers?.length ?? 0);
    if (chunk.length > 0 && (parameters + rowParameters > limits.maxParameters || bytes + rowBytes > limits.maxBytes)) {
      chunks.push(chunk);
      chunk = [];
      parameters = 0;
      bytes = 0;
    }
    chunk.push(row);
    parameters += rowParameters;
    bytes += rowBytes;
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}
