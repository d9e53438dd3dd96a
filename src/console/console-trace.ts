import type { OutboxTrace, OutboxTraceMessage, OutboxTraceRecord } from '../outbox/outbox-trace.types';
import type { OutboxService } from '../outbox/outbox.service';
import { redactSecrets } from '../util/redact-secrets';
import { badRequest } from './console-problem';
import { unquote } from './console-keys';

/**
 * `GET <path>/api/trace?id=…&scope=…&depth=…`: `OutboxService.trace()` of a key or message id, read-only. `id` may
 * be pasted as the client's header carried it (RFC 8941 quotes are taken off); `scope` is the principal the key was
 * recorded under ('' when left out, as `trace()`). Stored responses only with the console option
 * `showStoredResponses: true`, redacted of credentials.
 */
export async function readTrace(
  outbox: OutboxService,
  raw: Record<string, unknown>,
  showStoredResponses: boolean,
): Promise<OutboxTrace> {
  const unknown = Object.keys(raw).filter((k) => k !== 'id' && k !== 'scope' && k !== 'depth');
  if (unknown.length > 0) throw badRequest(`Unknown parameter ${unknown.join(', ')}: use only id, scope and depth.`);
  const id = unquote(raw.id);
  if (typeof id !== 'string') throw badRequest('"id" must be one idempotency key or message id.');
  if (raw.scope !== undefined && typeof raw.scope !== 'string') throw badRequest('"scope" must be one scope.');
  let depth: number | undefined;
  if (raw.depth !== undefined) {
    depth = typeof raw.depth === 'string' && /^\d{1,2}$/.test(raw.depth) ? Number(raw.depth) : NaN;
  }
  // Invalid values are refused by trace() itself (OutboxTraceQueryError: answered 400).
  const trace = await outbox.trace(id, {
    scope: raw.scope as string | undefined,
    depth,
    includeResponses: showStoredResponses,
  });
  if (showStoredResponses) {
    if (trace.request) redactRecord(trace.request);
    if (trace.message) redactMessage(trace.message);
  }
  return trace;
}

function redactRecord(record: OutboxTraceRecord): void {
  if (record.response) {
    const { body, headers } = record.response;
    record.response = {
      body: body === null ? null : redactSecrets(body),
      headers: headers === null ? null : redactSecrets(headers),
    };
  }
  record.emitted.forEach(redactMessage);
}

function redactMessage(message: OutboxTraceMessage): void {
  message.consumers.forEach(redactRecord);
}
