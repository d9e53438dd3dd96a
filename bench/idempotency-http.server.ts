/**
 * The HTTP app measured by `idempotency-http.bench.ts`, run in a child process so the load generator does not share
 * its event loop. Routes with the same handler body — one insert in a transaction on PostgreSQL: `/plain` (no
 * decorator), `/idempotent` (this library's `@Idempotent()`), `/minimal` (the hand-written interceptor of
 * `idempotency-http.minimal.ts`: the least work for the same guarantees), `/node-idempotency`
 * (`@node-idempotency/nestjs` on its Redis store), and `/intercepted`, which shows what an interceptor costs (the
 * plain route behind an interceptor that only returns `next.handle()`). Reports its port to the parent over IPC.
 */
import 'reflect-metadata';
import { Body, Controller, HttpCode, Module, Post, UseInterceptors } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Idempotent as NodeIdempotent, NodeIdempotencyModule } from '@node-idempotency/nestjs';
import { Idempotent, OUTBOX_MIGRATIONS, OutboxModule, OutboxService } from '../src';
import { TestOrder } from '../test/fixtures/order.entity';
import { MinimalIdempotencyInterceptor } from './idempotency-http.minimal';
import { NoopInterceptor } from './noop.interceptor';

interface OrderBody {
  reference: string;
  amount: number;
}

@Controller()
class BenchController {
  constructor(private readonly outbox: OutboxService) {}

  private place(body: OrderBody) {
    return this.outbox.transaction(async (manager) => {
      await manager.insert(TestOrder, { reference: body.reference, amount: body.amount });
      return { ok: true, reference: body.reference };
    });
  }

  @Post('plain')
  @HttpCode(201)
  plain(@Body() body: OrderBody) {
    return this.place(body);
  }

  @Post('idempotent')
  @HttpCode(201)
  @Idempotent()
  idempotent(@Body() body: OrderBody) {
    return this.place(body);
  }

  @Post('minimal')
  @HttpCode(201)
  @UseInterceptors(MinimalIdempotencyInterceptor)
  minimal(@Body() body: OrderBody) {
    return this.place(body);
  }

  @Post('intercepted')
  @HttpCode(201)
  @UseInterceptors(NoopInterceptor)
  intercepted(@Body() body: OrderBody) {
    return this.place(body);
  }

  @Post('node-idempotency')
  @HttpCode(201)
  @NodeIdempotent()
  nodeIdempotency(@Body() body: OrderBody) {
    return this.place(body);
  }
}

async function main(): Promise<void> {
  const database = JSON.parse(process.env.BENCH_DB_OPTIONS ?? '{}');
  @Module({
    imports: [
      TypeOrmModule.forRoot({
        ...database,
        entities: [TestOrder],
        autoLoadEntities: true,
        // The library's tables as production makes them, by the shipped migrations (the expiry index is theirs
        // alone); synchronize adds the bench's own table.
        migrations: [...OUTBOX_MIGRATIONS],
        migrationsRun: true,
        synchronize: true,
        logging: false,
      }),
      OutboxModule.forRoot({ publisher: { enabled: false } }),
      NodeIdempotencyModule.forRootAsync({
        storage: { adapter: 'redis' as any, options: { url: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379' } },
        cacheKeyPrefix: `bench-${process.pid}`,
        cacheTTLMS: 600_000,
      }),
    ],
    controllers: [BenchController],
  })
  class BenchModule {}
  const app = await NestFactory.create(BenchModule, { logger: ['error'] });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address();
  process.send?.({ port });
  process.on('message', async (message: unknown) => {
    if (message === 'cpu') {
      const { user, system } = process.cpuUsage();
      process.send?.({ cpu: user + system, user, system });
    }
    if (message === 'stop') {
      await app.close();
      process.exit(0);
    }
  });
}

void main().catch((error) => {
  console.error(error);
  process.exit(1);
});
