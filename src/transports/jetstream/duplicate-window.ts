import { OutboxConfigurationError } from '../../errors';

/** The relay's timing that a broker's duplicate detection must cover. */
export interface OutboxRelayTiming {
  /** `publisher.leaseDuration`: a crash after the PubAck publishes the message again once the lease ends. */
  leaseDuration: number;
  /** `retry.maxDelay`: an unknown outcome (no PubAck in time) publishes the message again after at most this. */
  maxRetryDelay: number;
}

interface StreamManager {
  streams: { info(name: string): Promise<{ config: { duplicate_window: number } }> };
}

/**
 * Checks that `stream` exists and that its `duplicate_window` (nanoseconds) is at least lease + longest retry delay:
 * else a message published again after a crash or an unknown outcome would be stored twice.
 * Throws `OutboxConfigurationError` naming the stream setting to change.
 */
export async function checkDuplicateWindow(
  manager: StreamManager,
  stream: string,
  { leaseDuration, maxRetryDelay }: OutboxRelayTiming,
): Promise<void> {
  let windowNanos: number;
  try {
    windowNanos = (await manager.streams.info(stream)).config.duplicate_window;
  } catch (error) {
    const apiError = (error as { api_error?: { err_code?: number } })?.api_error;
    if (apiError?.err_code === 10059 || /stream not found/i.test(String((error as Error)?.message))) {
      throw new OutboxConfigurationError(
        `OutboxJetStreamClient option \`stream\` names JetStream stream '${stream}', which does not exist. Create it ` +
          `(e.g. \`nats stream add ${stream} --subjects '<your event patterns>' --dupe-window ` +
          `${Math.ceil((leaseDuration + maxRetryDelay) / 60_000)}m\`), or name the stream that captures your subjects.`,
      );
    }
    throw error;
  }
  const windowMs = Math.floor((windowNanos ?? 0) / 1e6);
  const needed = leaseDuration + maxRetryDelay;
  if (windowMs < needed) {
    throw new OutboxConfigurationError(
      `JetStream stream '${stream}' has duplicate_window ${windowMs} ms, but the outbox may publish a message again up ` +
        `to ${needed} ms after the first time (publisher.leaseDuration ${leaseDuration} ms + retry.maxDelay ` +
        `${maxRetryDelay} ms); a shorter window would store it twice. Raise the stream's duplicate_window to at least ` +
        `${needed} ms (\`nats stream edit ${stream} --dupe-window ${Math.ceil(needed / 1000)}s\`, or ` +
        '`duplicate_window` in nanoseconds in its StreamConfig), or lower publisher.leaseDuration / retry.maxDelay.',
    );
  }
}
