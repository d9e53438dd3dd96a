/** The events the shop sends to the broker (UserSignedUp stays in process), so the subjects its stream captures. */
export const SAMPLE_SUBJECTS = ['OrderPlaced'];

/**
 * Creates the JetStream stream `stream` when it does not exist: the shop's subjects, and a duplicate window of 10
 * minutes — longer than the outbox may take to publish a message again (publisher.leaseDuration 30 s +
 * retry.maxDelay 5 min by default), which `OutboxJetStreamClient` checks at start-up. An existing stream is left as
 * it is (the client names the setting to change if its window is too short). In production, streams are usually
 * created by whoever runs NATS (`nats stream add`), not by the app.
 */
export async function ensureSampleStream(connection: Record<string, unknown>, stream: string): Promise<void> {
  // Loaded on use: only a shop configured for JetStream needs the `nats` package.
  const { connect, nanos } = await import('nats');
  const nc = await connect(connection);
  try {
    const jsm = await nc.jetstreamManager();
    const exists = await jsm.streams.info(stream).then(
      () => true,
      (error: { api_error?: { err_code?: number } }) => {
        if (error?.api_error?.err_code === 10059) return false;
        throw error;
      },
    );
    if (!exists) {
      await jsm.streams.add({ name: stream, subjects: SAMPLE_SUBJECTS, duplicate_window: nanos(10 * 60_000) });
    }
  } finally {
    await nc.close();
  }
}
