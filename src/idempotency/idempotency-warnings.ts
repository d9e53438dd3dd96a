import { MAX_JSON_DEPTH } from './stable-json';

/**
 * The warnings `@Idempotent()` logs once per handler (`consumer` is 'Controller.method'): a setup that weakens the
 * guarantee without failing a request. Imported as `warnings`, e.g. `warnings.sharedKeys(consumer)`.
 */

/** Remembers what was warned about, so each warning is logged once per handler (`warnOnce`). */
export class FirstTimes {
  private readonly seen = new Set<string>();

  /** True the first time it is asked about `about`, false ever after. */
  first(about: string): boolean {
    if (this.seen.has(about)) return false;
    this.seen.add(about);
    return true;
  }
}

/** An HTTP route ran without a principal and without a `scope` option: its keys are shared by every client. */
export function sharedKeys(consumer: string): string {
  return (
    `${consumer} ran without a principal (no request.user with an id or sub) and without a ` +
    '`scope` option, so its idempotency keys are shared by every client: a client that sends another ' +
    "client's key and body receives that client's stored response. Put the authentication guard before " +
    'it, or pass @Idempotent({ scope: (context) => … }) (e.g. a tenant or API-key id).'
  );
}

/** An HTTP handler returned a stream: committed without a record. */
export function streamNotStored(consumer: string): string {
  return (
    `${consumer} returned a stream, which cannot be stored or replayed: its effect was committed without an ` +
    'idempotency record, so a retry runs it again. Return a JSON body from idempotent handlers.'
  );
}

/** A message without an id: handled in a transaction without a record. */
export function messageWithoutId(consumer: string): string {
  return (
    `${consumer} received a message without an id: it ran in a transaction without an idempotency ` +
    "record, so a redelivery runs it again. Messages from this library's outbox carry one (TCP/Redis " +
    'consumers need OutboxEnvelopeDeserializer); for other producers pass ' +
    '@Idempotent({ key: (data, context) => … }).'
  );
}

/** A message's data nested too deeply to fingerprint: deduplicated by message id only. */
export function nestedData(consumer: string): string {
  return (
    `${consumer} received data nested more than ${MAX_JSON_DEPTH} levels deep: ` +
    'it is deduplicated by message id only.'
  );
}
