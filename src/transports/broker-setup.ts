import type { OutboxRelayTiming } from './jetstream/duplicate-window';

/** A client that checks its broker's setup against the relay's timing (`OutboxJetStreamClient`). */
interface CheckedClient {
  checkOutboxRelay?(timing: OutboxRelayTiming): Promise<void>;
}

/**
 * Lets a client that knows how check its broker's setup for the outbox (a JetStream stream's duplicate window):
 * resolves at once for the others. Rejects with `OutboxConfigurationError` naming the setting to change.
 */
export async function checkBrokerSetup(client: unknown, timing: OutboxRelayTiming): Promise<void> {
  const checked = client as CheckedClient;
  if (typeof checked?.checkOutboxRelay === 'function') await checked.checkOutboxRelay(timing);
}
