import { OutboxJetStreamClient } from './outbox-jetstream.client';

/** The connection options `OutboxJetStreamClient` hands to Nest's `ClientNats` (and so to `nats.connect()`). */
const connectionOptionsOf = (client: OutboxJetStreamClient) => (client as unknown as { options: object }).options;

describe('OutboxJetStreamClient options', () => {
  it('connects without per-publish stack traces by default; the JetStream options stay out of the connection', () => {
    const client = new OutboxJetStreamClient({ servers: ['nats://127.0.0.1:4222'], stream: 'ORDERS' });
    expect(connectionOptionsOf(client)).toEqual({ servers: ['nats://127.0.0.1:4222'], noAsyncTraces: true });
  });

  it('keeps noAsyncTraces: false when the app asks for the traces', () => {
    const client = new OutboxJetStreamClient({ stream: 'ORDERS', pubAckTimeout: 5_000, noAsyncTraces: false });
    expect(connectionOptionsOf(client)).toEqual({ noAsyncTraces: false });
  });

  it('needs the stream', () => {
    expect(() => new OutboxJetStreamClient({} as never)).toThrow(/needs the option `stream`/);
  });
});
