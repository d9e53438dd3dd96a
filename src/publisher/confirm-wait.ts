import type { ClientProxy } from '@nestjs/microservices';
import { OutboxPublishTimeoutError } from '../errors';
import { dispatchEvent } from '../transports/dispatch';

/** How long to wait for a broker's confirm, and what to do when it is late. */
export interface ConfirmWait {
  /** Milliseconds after which a confirm is late (`publisher.publishTimeout`). */
  publishTimeout: number;
  /** Longest wait for a late confirm while the client stays connected (`publisher.maxConfirmWait`). */
  maxConfirmWait: number;
  /** The client's reported connection state; `undefined` when it reports none (then it is taken as connected). */
  connected(): boolean | undefined;
  /** Called once, when the confirm is late and the client is still connected: the wait goes on. */
  late(): void;
  /** True once the publisher is stopping: a late confirm is then no longer waited for (shutdown stays bounded). */
  stopping(): boolean;
}

/**
 * Sends one record and resolves once the transport confirmed it (`dispatchEvent()`). A confirm that has not come
 * within `publishTimeout` is late, not failed: while the client stays connected the publish may still be confirmed,
 * so the wait goes on (`late()` is told once) — republishing it now would deliver the message twice. The wait ends
 * in `OutboxPublishTimeoutError` (an unknown outcome) only when, at one of the checks made every `publishTimeout`,
 * the client reports itself disconnected or the publisher is stopping, or after `maxConfirmWait` in all.
 */
export async function dispatchConfirmed(
  client: ClientProxy,
  pattern: string,
  record: unknown,
  wait: ConfirmWait,
): Promise<void> {
  const started = Date.now();
  const confirmed = dispatchEvent(client, pattern, record).then(() => true as const);
  let timer: NodeJS.Timeout | undefined;
  let toldLate = false;
  try {
    for (;;) {
      const waited = Date.now() - started;
      const step = Math.max(1, Math.min(wait.publishTimeout, wait.maxConfirmWait - waited));
      const tick = new Promise<false>((resolve) => (timer = setTimeout(resolve, step, false)));
      if (await Promise.race([confirmed, tick])) return;
      const elapsed = Date.now() - started;
      if (wait.connected() === false) {
        throw new OutboxPublishTimeoutError(
          `No confirmation within ${elapsed} ms and the client is disconnected (outcome unknown; retried once the ` +
            'broker is back, without counting the attempt)',
        );
      }
      if (wait.stopping()) {
        throw new OutboxPublishTimeoutError(
          `No confirmation within ${elapsed} ms and the publisher is stopping (outcome unknown; retried by the next ` +
            'publisher without counting the attempt)',
        );
      }
      if (elapsed >= wait.maxConfirmWait) {
        throw new OutboxPublishTimeoutError(
          `No confirmation within publisher.maxConfirmWait (${wait.maxConfirmWait} ms) although the client is ` +
            'connected (outcome unknown; retried without counting the attempt)',
        );
      }
      if (!toldLate) {
        toldLate = true;
        wait.late();
      }
    }
  } catch (error) {
    // A confirm or an error that comes after this wait gave up has no one to tell.
    confirmed.catch(() => undefined);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}
