export { OutboxJetStreamClient } from './outbox-jetstream.client';
export type { OutboxJetStreamClientOptions } from './outbox-jetstream.client';
export { OutboxJetStreamContext, OutboxJetStreamServer } from './outbox-jetstream.server';
export type { OutboxJetStreamMessage, OutboxJetStreamServerOptions } from './outbox-jetstream.server';
