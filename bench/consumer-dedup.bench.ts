import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { Controller, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, EventPattern, MicroserviceOptions, Payload, RmqContext, Transport } from '@nestjs/microservices';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Idempotent, OUTBOX_MIGRATIONS, OutboxModule, OutboxService } from '../src';
import { TestOrder } from '../test/fixtures/order.entity';
import { deleteQueue, RABBITMQ_URL, uniqueQueue } from '../test/helpers/consumers';
import { createTestDatabase } from '../test/helpers/databases';
import type { Bench, BenchResult } from './bench-kit';
import { median } from './bench-kit';
import { PostgresCpu } from './postgres-cpu';

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 1000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const PREFETCH = 50;

const handled = { plain: 0, idempotent: 0 };

@Controller()
class PlainConsumer {
  constructor(private readonly outbox: OutboxService) {}

  /** One insert in a transaction, acked after the commit (what a careful consumer does without dedup). */
  @EventPattern('bench.plain')
  async on(@Payload() data: { reference: string }, @Ctx() context: RmqContext) {
    await this.outbox.transaction((manager) => manager.insert(TestOrder, { reference: data.reference, amount: 1 }));
    context.getChannelRef().ack(context.getMessage());
    handled.plain++;
  }
}

@Controller()
class IdempotentConsumer {
  constructor(private readonly outbox: OutboxService) {}

  /** The same insert, deduplicated by message id; the interceptor acks after the commit (manualAck). */
  @EventPattern('bench.idempotent')
  @Idempotent({ manualAck: true })
  async on(@Payload() data: { reference: string }) {
    await this.outbox.transaction((manager) => manager.insert(TestOrder, { reference: data.reference, amount: 1 }));
    handled.idempotent++;
  }
}

/**
 * Messages through RabbitMQ (persistent, noAck: false, prefetch 50) to a Nest consumer doing one insert on
 * PostgreSQL, with and without `@Idempotent()`. Each run publishes MESSAGES messages with distinct message ids and
 * times until the last one is handled; runs alternate between the two handlers (order flipped every round) and
 * the mean rates are compared. The CPU time per message of this process (consumer and publisher) and of the bench
 * database's PostgreSQL backends are reported too: they are the figures least disturbed by other load.
 */
const bench: Bench = async (): Promise<BenchResult> => {
  const db = await createTestDatabase('postgres');
  const queue = uniqueQueue('bench-dedup');
  @Module({
    imports: [
      TypeOrmModule.forRoot({
        ...db.options,
        entities: [TestOrder],
        autoLoadEntities: true,
        // The library's tables as production makes them, by the shipped migrations (the expiry index is theirs
        // alone); synchronize adds the bench's own table.
        migrations: [...OUTBOX_MIGRATIONS],
        migrationsRun: true,
        synchronize: true,
        logging: false,
      } as any),
      OutboxModule.forRoot({ publisher: { enabled: false } }),
    ],
    controllers: [PlainConsumer, IdempotentConsumer],
  })
  class ConsumerModule {}
  const app = await NestFactory.createMicroservice<MicroserviceOptions>(ConsumerModule, {
    transport: Transport.RMQ,
    options: { urls: [RABBITMQ_URL], queue, noAck: false, prefetchCount: PREFETCH, queueOptions: { durable: true } },
    logger: ['error'],
  });
  await app.listen();
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const amqp = await (require('amqplib') as typeof import('amqplib')).connect(RABBITMQ_URL);
  const channel = await amqp.createConfirmChannel();
  const dbCpu = await PostgresCpu.open(db.options);
  const cpu = { plain: [] as number[], idempotent: [] as number[] };
  const dbCpuPerMessage = { plain: [] as number[], idempotent: [] as number[] };

  const run = async (kind: 'plain' | 'idempotent', count: number): Promise<number> => {
    const target = handled[kind] + count;
    const dbBefore = await dbCpu?.sample();
    const cpuBefore = process.cpuUsage();
    const started = process.hrtime.bigint();
    for (let i = 0; i < count; i++) {
      const messageId = randomUUID();
      channel.sendToQueue(
        queue,
        Buffer.from(JSON.stringify({ pattern: `bench.${kind}`, data: { reference: messageId } })),
        { messageId, persistent: true },
      );
    }
    await channel.waitForConfirms();
    while (handled[kind] < target) await new Promise((r) => setTimeout(r, 2));
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const used = process.cpuUsage(cpuBefore);
    cpu[kind].push((used.user + used.system) / count);
    if (dbCpu && dbBefore) dbCpuPerMessage[kind].push(PostgresCpu.between(dbBefore, await dbCpu.sample()) / count);
    return count / seconds;
  };

  try {
    await run('plain', 200); // warm-up
    await run('idempotent', 200);
    for (const kind of ['plain', 'idempotent'] as const) {
      cpu[kind].length = 0;
      dbCpuPerMessage[kind].length = 0;
    }
    const rates = { plain: [] as number[], idempotent: [] as number[] };
    for (let round = 0; round < ROUNDS; round++) {
      // The order alternates every round, so drift on a shared machine hits both alike.
      for (const kind of round % 2 ? (['idempotent', 'plain'] as const) : (['plain', 'idempotent'] as const)) {
        rates[kind].push(await run(kind, MESSAGES));
      }
    }
    const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
    const plain = mean(rates.plain);
    const idempotent = mean(rates.idempotent);
    return {
      table: (['plain', 'idempotent'] as const).map((kind) => ({
        consumer: kind === 'plain' ? 'plain (insert + ack)' : '@Idempotent() (record + insert, ack after commit)',
        'msg/s (mean)': Math.round(mean(rates[kind])),
        'app CPU µs/msg': Math.round(median(cpu[kind])),
        'PostgreSQL CPU µs/msg': dbCpu ? Math.round(median(dbCpuPerMessage[kind])) : 'n/a',
        runs: rates[kind].map(Math.round).join(' / '),
      })),
      fields: {
        plain_msg_s: Math.round(plain),
        idempotent_msg_s: Math.round(idempotent),
        ratio: Math.round((idempotent / plain) * 100) / 100,
        plain_cpu_us_per_msg: Math.round(median(cpu.plain)),
        idempotent_cpu_us_per_msg: Math.round(median(cpu.idempotent)),
        ...(dbCpu
          ? {
              plain_db_cpu_us_per_msg: Math.round(median(dbCpuPerMessage.plain)),
              idempotent_db_cpu_us_per_msg: Math.round(median(dbCpuPerMessage.idempotent)),
            }
          : {}),
        messages: MESSAGES,
        rounds: ROUNDS,
        prefetch: PREFETCH,
      },
    };
  } finally {
    await amqp.close().catch(() => undefined);
    await dbCpu?.close();
    await app.close();
    await deleteQueue(queue);
    await db.drop();
  }
};

export default bench;
