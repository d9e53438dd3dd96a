import { Body, Controller, ExecutionContext, Headers, HttpCode, INestApplication, Post } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { IdempotencyKey, Idempotent, OutboxModuleOptions, OutboxService } from '../../../src';
import { createOutboxTestingModule, OutboxTestAppOptions } from '../../fixtures/outbox-app';
import type { TestDatabase } from '../../helpers/databases';
import { freePort } from '../../helpers/ports';
import { FAULT_ENTITIES, FaultEffect } from './entities';
import { sleep } from './produce';

/** Lifetime of the records of `POST /orders/short-lived`. */
export const SHORT_TTL_MS = 1_000;

/** Milliseconds the handler holds its transaction open, so concurrent requests with one key overlap. */
export const handlerDelay = { ms: 0 };

/** The tenant a request claims (`X-Tenant`); the idempotency scope. */
const tenantOf = (context: ExecutionContext): string | undefined => {
  const value = context.switchToHttp().getRequest().headers['x-tenant'];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
};

/**
 * `POST /orders`, guarded by `@Idempotent()` and scoped per tenant: writes one effect row and one outbox event in
 * the request's transaction (a non-idempotent effect: only the key stands between a retry and a second row), and
 * answers what it did.
 */
@Controller('orders')
export class OrdersController {
  constructor(private readonly outbox: OutboxService) {}

  @Post()
  @HttpCode(201)
  @Idempotent({ scope: tenantOf })
  async create(@Body() body: unknown, @IdempotencyKey() key: string, @Headers('x-tenant') tenant?: string) {
    const effect = await this.outbox.manager.save(FaultEffect, { source: key, scope: tenant ?? '' });
    await this.outbox.emit('OrderPlaced', { effectId: effect.id });
    if (handlerDelay.ms > 0) await sleep(handlerDelay.ms);
    return { effectId: effect.id, key, tenant: tenant ?? null, received: body };
  }

  /** The same, with records that expire after `SHORT_TTL_MS` (for the purge check). */
  @Post('short-lived')
  @HttpCode(201)
  @Idempotent({ scope: tenantOf, ttl: SHORT_TTL_MS })
  async createShortLived(@Body() body: unknown, @IdempotencyKey() key: string, @Headers('x-tenant') tenant?: string) {
    const effect = await this.outbox.manager.save(FaultEffect, { source: key, scope: tenant ?? '' });
    return { effectId: effect.id, key, tenant: tenant ?? null, received: body };
  }
}

/** Starts the HTTP app on a free port of 127.0.0.1; resolves with it and its base URL. */
export async function startHttpApp(
  db: TestDatabase,
  options: { outbox?: Omit<OutboxModuleOptions, 'client'>; client?: OutboxTestAppOptions['client']; logger?: any } = {},
) {
  const { outbox = { publisher: { enabled: false } }, client, logger = ['error'] } = options;
  const moduleRef = await createOutboxTestingModule({
    db,
    client,
    outbox,
    imports: [TypeOrmModule.forFeature(FAULT_ENTITIES)],
    controllers: [OrdersController],
  });
  const app: INestApplication = moduleRef.createNestApplication({ logger });
  const port = await freePort();
  await app.listen(port, '127.0.0.1');
  return { app, url: `http://127.0.0.1:${port}` };
}
