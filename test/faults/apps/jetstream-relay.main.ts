/**
 * Child process of the JetStream relay kill test: an app whose OutboxPublisher relays the outbox to a JetStream
 * stream through `OutboxJetStreamClient`. Reports every PubAck that says `duplicate` as a signal line. With
 * `stallAfterAcks`, once this incarnation has received that many PubAcks, every further publish stalls after its
 * PubAck arrived — the stream stored the message, the relay never marks it sent — and `stalled` is signalled once,
 * for the test to SIGKILL the process right there, between PubAck and marking sent.
 */
import 'reflect-metadata';
import { Module, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ClientProxy, ClientsModule, ReadPacket } from '@nestjs/microservices';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { DataSourceOptions } from 'typeorm';
import { OutboxJetStreamClient, OutboxModule, OutboxModuleOptions } from '../../../src';
import { TestOrder } from '../../fixtures/order.entity';
import { childConfig, signal } from '../support/child-app';

export interface JetStreamRelayConfig {
  db: DataSourceOptions;
  servers: string[];
  stream: string;
  publisher: OutboxModuleOptions['publisher'];
  retry: OutboxModuleOptions['retry'];
  /** Stall every publish after its PubAck once this many PubAcks arrived in this process (no stall when absent). */
  stallAfterAcks?: number;
}

async function main(): Promise<void> {
  const config = childConfig<JetStreamRelayConfig>();
  let acks = 0;
  let stalled = false;

  /** The library's client; only what happens after its PubAck is observed (and, past the threshold, stalled). */
  class ObservedJetStreamClient extends OutboxJetStreamClient {
    protected async dispatchEvent(packet: ReadPacket): Promise<any> {
      const ack = (await super.dispatchEvent(packet)) as { seq: number; duplicate: boolean };
      acks++;
      if (ack.duplicate) signal('duplicate', { seq: ack.seq, pid: process.pid });
      if (config.stallAfterAcks !== undefined && acks >= config.stallAfterAcks) {
        if (!stalled) signal('stalled', { acks, pid: process.pid });
        stalled = true;
        await new Promise(() => undefined);
      }
      return ack;
    }
  }

  @Module({
    imports: [
      TypeOrmModule.forRoot({
        ...config.db,
        entities: [TestOrder],
        autoLoadEntities: true,
        synchronize: false,
        logging: false,
      } as any),
      ClientsModule.register([
        {
          name: 'BROKER',
          customClass: ObservedJetStreamClient as Type<ClientProxy>,
          options: { servers: config.servers, stream: config.stream },
        },
      ]),
      ScheduleModule.forRoot(),
      OutboxModule.forRoot({ client: 'BROKER', publisher: config.publisher, retry: config.retry }),
    ],
  })
  class JetStreamRelayModule {}

  const app = await NestFactory.createApplicationContext(JetStreamRelayModule, { logger: ['error', 'warn'] });
  app.enableShutdownHooks();
  await app.init();
  signal('ready', { pid: process.pid });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
