import { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { describeError } from '../../util/describe-error';
import { pgConnectionConfig, pgModule } from './postgres.connection';

/**
 * Wakes the publishers of other processes on PostgreSQL: after a commit that wrote outbox rows a `NOTIFY` goes out
 * on a channel named after the table; every replica `LISTEN`s on its own connection (outside the pool) and runs
 * a pass when one arrives. Only a latency hint: polling still guarantees delivery, so a lost notification or a
 * transaction-pooling proxy (which drops LISTEN) costs latency, never messages.
 */
export class PostgresWakeup {
  private readonly logger = new Logger('OutboxWakeup');
  private client?: any;
  private closed = false;
  private sending = false;
  private sendAgain = false;
  private reconnectTimer?: NodeJS.Timeout;

  constructor(
    private readonly dataSource: DataSource,
    /** The outbox's channel (see `outboxResourceNames()`). */
    private readonly channel: string,
    /** This process's id: its own notifications are ignored (it woke itself already). */
    private readonly instanceId: string,
  ) {}

  /** Coalesced NOTIFY through the pool: at most one in flight, one more queued behind it. */
  notify(): void {
    if (this.closed) return;
    if (this.sending) {
      this.sendAgain = true;
      return;
    }
    this.sending = true;
    this.dataSource
      .query('SELECT pg_notify($1, $2)', [this.channel, this.instanceId])
      .catch((error: unknown) => this.logger.debug?.(`NOTIFY failed (a latency hint only): ${describeError(error)}`))
      .finally(() => {
        this.sending = false;
        if (this.sendAgain && !this.closed) {
          this.sendAgain = false;
          this.notify();
        }
      });
  }

  /** LISTENs on a dedicated connection and calls `onWake` for notifications of other processes. Reconnects. */
  async listen(onWake: () => void): Promise<void> {
    if (this.closed) return;
    const { Client } = pgModule(this.dataSource);
    const client = new Client(pgConnectionConfig(this.dataSource, 'nestjs-outbox-listener'));
    this.client = client;
    const retry = () => {
      if (this.closed || this.client !== client) return;
      this.client = undefined;
      client.end().catch(() => undefined);
      this.reconnectTimer = setTimeout(() => void this.listen(onWake).catch(() => retry()), 1000);
      this.reconnectTimer.unref?.();
    };
    client.on('error', retry);
    client.on('end', retry);
    client.on('notification', (msg: { channel: string; payload?: string }) => {
      if (msg.channel === this.channel && msg.payload !== this.instanceId) onWake();
    });
    try {
      await client.connect();
      await client.query(`LISTEN "${this.channel}"`);
    } catch (error) {
      this.logger.warn(`LISTEN failed; relying on polling until it reconnects: ${describeError(error)}`);
      retry();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = undefined;
    if (client) await client.end().catch(() => undefined);
  }
}
