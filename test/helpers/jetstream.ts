import { randomBytes } from 'node:crypto';
import { connect, NatsConnection, nanos } from 'nats';
import { SERVICES } from './services';

export const NATS_URL = `nats://${SERVICES.nats.host}:${SERVICES.nats.port}`;

/**
 * A JetStream stream of its own for one test (unique name and subjects), on the shared nats-server; `delete()`
 * removes it. `ids()` reads every stored message's `Nats-Msg-Id`, in stream order.
 */
export class TestStream {
  private nc?: NatsConnection;
  readonly name = `OUTBOX_T_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`.toUpperCase();
  /** The subject prefix this stream captures (`<prefix>.>`): patterns the test emits start with it. */
  readonly prefix = this.name.toLowerCase().replace(/_/g, '-');

  constructor(private readonly duplicateWindowMs = 120_000) {}

  /** A subject this stream captures. */
  subject(name: string): string {
    return `${this.prefix}.${name}`;
  }

  async create(): Promise<this> {
    this.nc = await connect({ servers: NATS_URL });
    const jsm = await this.nc.jetstreamManager();
    await jsm.streams.add({
      name: this.name,
      subjects: [`${this.prefix}.>`],
      duplicate_window: nanos(this.duplicateWindowMs),
    });
    return this;
  }

  async connection(): Promise<NatsConnection> {
    return this.nc ?? (this.nc = await connect({ servers: NATS_URL }));
  }

  /** Messages the stream holds. */
  async count(): Promise<number> {
    const jsm = await (await this.connection()).jetstreamManager();
    return (await jsm.streams.info(this.name)).state.messages;
  }

  /** The `Nats-Msg-Id` of every stored message, in stream order. */
  async ids(): Promise<string[]> {
    const nc = await this.connection();
    const total = await this.count();
    const ids: string[] = [];
    if (total === 0) return ids;
    const consumer = await nc.jetstream().consumers.get(this.name);
    const messages = await consumer.consume({ max_messages: 1000 });
    for await (const m of messages) {
      ids.push(m.headers?.get('Nats-Msg-Id') ?? '');
      if (ids.length >= total) break;
    }
    await messages.close();
    return ids;
  }

  async delete(): Promise<void> {
    const nc = await this.connection();
    const jsm = await nc.jetstreamManager();
    await jsm.streams.delete(this.name).catch(() => undefined);
    await nc.close();
    this.nc = undefined;
  }
}
