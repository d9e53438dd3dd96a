/**
 * Child process of the steps crash test (test/idempotency-steps-crash.e2e-spec.ts): an HTTP app (Express or
 * Fastify) whose `@Idempotent()` handler charges through two `idempotentStep()`s against a provider the test runs,
 * then asks the provider's gate whether to go on (the test SIGKILLs this process there), then writes its effect.
 */
import 'reflect-metadata';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { DataSourceOptions } from 'typeorm';
import { Idempotent, idempotentStep, OutboxModule, OutboxService } from '../../../src';
import { TestOrder } from '../../fixtures/order.entity';
import { freePort } from '../../helpers/ports';
import { childConfig, signal } from '../support/child-app';

export interface StepsAppConfig {
  db: DataSourceOptions;
  platform: 'express' | 'fastify';
  /** Base URL of the test's provider (`POST /charge`, `POST /gate`). */
  provider: string;
}

const config = childConfig<StepsAppConfig>();

async function call(path: string, body: object): Promise<any> {
  const response = await fetch(`${config.provider}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`provider ${path}: ${response.status}`);
  return response.json();
}

@Controller('shop')
class ShopController {
  constructor(private readonly outbox: OutboxService) {}

  @Post('checkout')
  @Idempotent()
  async checkout(@Body() dto: { reference: string; amount: number }) {
    const charge = await idempotentStep('charge', (stepKey) => call('/charge', { stepKey, amount: dto.amount }));
    signal('step', { name: 'charge', reference: dto.reference });
    const fee = await idempotentStep('fee', (stepKey) => call('/charge', { stepKey, amount: 1 }));
    signal('step', { name: 'fee', reference: dto.reference });
    await call('/gate', { reference: dto.reference });
    await this.outbox.manager.save(TestOrder, { reference: dto.reference, amount: dto.amount });
    return { reference: dto.reference, charge, fee };
  }
}

async function main(): Promise<void> {
  @Module({
    imports: [
      TypeOrmModule.forRoot({
        ...config.db,
        entities: [TestOrder],
        autoLoadEntities: true,
        synchronize: false,
        logging: false,
      } as any),
      ScheduleModule.forRoot(),
      OutboxModule.forRoot({ publisher: { enabled: false } }),
    ],
    controllers: [ShopController],
  })
  class StepsAppModule {}

  const app =
    config.platform === 'fastify'
      ? await NestFactory.create(StepsAppModule, new FastifyAdapter(), { logger: ['error', 'warn'] })
      : await NestFactory.create(StepsAppModule, { logger: ['error', 'warn'] });
  const port = await freePort();
  await app.listen(port, '127.0.0.1');
  signal('ready', { pid: process.pid, url: `http://127.0.0.1:${port}` });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
