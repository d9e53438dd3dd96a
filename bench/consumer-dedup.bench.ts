import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { Controller, Module, UseInterceptors } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, EventPattern, MicroserviceOptions, Payload, RmqContext, Transport } from '@nestjs/microservices';
import { TypeOrmModule } from '@nestjs/typeorm';
import { getOutboxMessageId, Idempotent, OUTBOX_MIGRATIONS, OutboxModule, OutboxService } from '../src';
import { TestOrder } from '../test/fixtures/order.entity';
import { deleteQueue, RABBITMQ_URL, uniqueQueue } from '../test/helpers/consumers';
import { createTestDatabase } from '../test/helpers/databases';
import type { Bench, BenchResult } from './bench-kit';
import { median } from './bench-kit';
import { PostgresCpu } from './postgres-cpu';
import { NoopInterceptor } from './noop.interceptor';

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 1000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const PREFETCH = 50;

type Kind = 'plain' | 'intercepted' | 'idempotent' | 'once';
const KINDS: Kind[] = ['plain', 'intercepted', 'idempotent', 'once'];
const handled: Record<Kind, number> = { plain: 0, intercepted: 0, idempotent: 0, once: 0 };

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
class InterceptedConsumer {
  constructor(private readonly outbox: OutboxService) {}

  /** The plain consumer behind a no-op interceptor: the baseline of what any interceptor-based guard pays. */
  @EventPattern('bench.intercepted')
  @UseInterceptors(NoopInterceptor)
  async on(@Payload() data: { reference: string }, @Ctx() context: RmqContext) {
    await this.outbox.transaction((manager) => manager.insert(TestOrder, { reference: data.reference, amount: 1 }));
    context.getChannelRef().ack(context.getMessage());
    handled.intercepted++;
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

@Controller()
class OnceConsumer {
  constructor(private readonly outbox: OutboxService) {}

  /** The same insert, deduplicated by message id with `outbox.once()` (no interceptor); acked after the commit. */
  @EventPattern('bench.once')
  async on(@Payload() data: { reference: string }, @Ctx() context: RmqContext) {
    const messageId = getOutboxMessageId(data, context)!;
    await this.outbox.once(
      messageId,
      (manager) => manager.insert(TestOrder, { reference: data.reference, amount: 1 }),
      { scope: 'bench.once' },
    );
    context.getChannelRef().ack(context.getMessage());
    handled.once++;
  }
}

/**
 * Messages through RabbitMQ (persistent, noAck: false, prefetch 50) to a Nest consumer doing one insert on
 * PostgreSQL: with `@Idempotent()`, with `outbox.once()`, without either, and without them behind a no-op interceptor (the share of the gap that
 * is Nest's interceptor machinery, which any interceptor-based guard pays). Each run publishes MESSAGES messages with
 * distinct message ids and times until the last one is handled; runs rotate between the four handlers (the order
 * shifts every round) and the mean rates are compared. The CPU time per message of this process (consumer and
 * publisher) and of the bench database's PostgreSQL backends are reported too: they are the figures least disturbed
 * by other load.
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
    controllers: [PlainConsumer, InterceptedConsumer, IdempotentConsumer, OnceConsumer],
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
  const perKind = (): Record<Kind, number[]> => ({ plain: [], intercepted: [], idempotent: [], once: [] });
  const cpu = perKind();
  const dbCpuPerMessage = perKind();

  const run = async (kind: Kind, count: number): Promise<number> => {
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
    for (const kind of KINDS) await run(kind, 200); // warm-up
    for (const kind of KINDS) {
      cpu[kind].length = 0;
      dbCpuPerMessage[kind].length = 0;
    }
    const rates = perKind();
    for (let round = 0; round < ROUNDS; round++) {
      // The order rotates every round, so drift on a shared machine hits every consumer alike.
      for (const kind of KINDS.map((_, i) => KINDS[(i + round) % KINDS.length])) {
        rates[kind].push(await run(kind, MESSAGES));
      }
    }
    const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
    const plain = mean(rates.plain);
    const intercepted = mean(rates.intercepted);
    const idempotent = mean(rates.idempotent);
    const once = mean(rates.once);
    const round2 = (x: number) => Math.round(x * 100) / 100;
    const label: Record<Kind, string> = {
      plain: 'plain (insert + ack)',
      intercepted: 'plain behind a no-op interceptor',
      idempotent: '@Idempotent() (record + insert, ack after commit)',
      once: 'outbox.once() (record + insert, then ack)',
    };
    return {
      table: KINDS.map((kind) => ({
        consumer: label[kind],
        'msg/s (mean)': Math.round(mean(rates[kind])),
        'app CPU µs/msg': Math.round(median(cpu[kind])),
        'PostgreSQL CPU µs/msg': dbCpu ? Math.round(median(dbCpuPerMessage[kind])) : 'n/a',
        runs: rates[kind].map(Math.round).join(' / '),
      })),
      fields: {
        plain_msg_s: Math.round(plain),
        intercepted_msg_s: Math.round(intercepted),
        idempotent_msg_s: Math.round(idempotent),
        once_msg_s: Math.round(once),
        ratio: round2(idempotent / plain),
        // What the library adds over any interceptor (Nest's interceptor machinery is in both).
        ratio_vs_intercepted: round2(idempotent / intercepted),
        intercepted_vs_plain: round2(intercepted / plain),
        // The explicit consumer path against the plain consumer (issue 25: target >= 0.8).
        ratio_once: round2(once / plain),
        plain_cpu_us_per_msg: Math.round(median(cpu.plain)),
        intercepted_cpu_us_per_msg: Math.round(median(cpu.intercepted)),
        idempotent_cpu_us_per_msg: Math.round(median(cpu.idempotent)),
        once_cpu_us_per_msg: Math.round(median(cpu.once)),
        ...(dbCpu
          ? {
              plain_db_cpu_us_per_msg: Math.round(median(dbCpuPerMessage.plain)),
              intercepted_db_cpu_us_per_msg: Math.round(median(dbCpuPerMessage.intercepted)),
              idempotent_db_cpu_us_per_msg: Math.round(median(dbCpuPerMessage.idempotent)),
              once_db_cpu_us_per_msg: Math.round(median(dbCpuPerMessage.once)),
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
