import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MicroserviceOptions } from '@nestjs/microservices';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import { DataSource, EntitySubscriberInterface, InsertEvent } from 'typeorm';
import { checkIdempotencyContract, IDEMPOTENCY_CONTRACT_CHECKS, IdempotencyContractOptions } from '../src/testing';
import { consumerOptions, createSampleApp } from '../sample/app';
import { SampleAppModule } from '../sample/app.module';
import { parseBrokerUrl, SampleConfig } from '../sample/config';
import { ProblemDetailsFilter } from '../sample/http/problem-details.filter';
import { sampleValidationPipe } from '../sample/http/validation';
import { Order } from '../sample/orders/order.entity';
import { CREDIT_LIMIT } from '../sample/orders/orders.service';
import { Charge } from '../sample/payments/charge.entity';
import { Account } from '../sample/signups/account.entity';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { freePort } from './helpers/ports';
import { describeWith } from './helpers/services';

/**
 * The sample shop's idempotent routes pass the conformance kit of `nestjs-outbox/testing` — POST /payments,
 * POST /signups and POST /orders — on Express and Fastify, on SQLite, PostgreSQL and MariaDB (concurrent duplicates
 * are real concurrent requests on the shared servers).
 */

/**
 * Fails the next INSERT of one entity, after the row was written, inside the handler's transaction: the kit's
 * `failNext()` hook for these routes (the effect must roll back with the key).
 */
class FailNextInsert implements EntitySubscriberInterface {
  private armed?: Function;

  arm(entity: Function): void {
    this.armed = entity;
  }

  afterInsert(event: InsertEvent<unknown>): void {
    if (this.armed && event.metadata.target === this.armed) {
      this.armed = undefined;
      throw new Error('failNext(): this insert fails once, as the contract check asked');
    }
  }
}

type Platform = 'express' | 'fastify';

async function startSample(config: SampleConfig, platform: Platform): Promise<INestApplication> {
  let app: INestApplication;
  if (platform === 'express') {
    app = await createSampleApp(config, { logger: false });
  } else {
    // The same app as createSampleApp() builds, on Fastify.
    app = await NestFactory.create(SampleAppModule.forRoot(config), new FastifyAdapter(), {
      logger: false,
      abortOnError: false,
    });
    app.useGlobalPipes(sampleValidationPipe());
    app.useGlobalFilters(new ProblemDetailsFilter(app.getHttpAdapter()));
    app.connectMicroservice<MicroserviceOptions>(consumerOptions(config.broker));
  }
  await app.startAllMicroservices();
  await app.listen(0, '127.0.0.1');
  return app;
}

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  for (const platform of ['express', 'fastify'] as Platform[]) {
    describeWith(servicesOf(kind), `Sample shop on ${DATABASE_LABEL[kind]} (${platform})`, () => {
      let db: TestDatabase;
      let app: INestApplication;
      const failNext = new FailNextInsert();
      const count = (entity: Function) => app.get(DataSource).getRepository(entity).count();

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        app = await startSample(
          {
            port: 0,
            database: db.options,
            databaseLabel: DATABASE_LABEL[kind],
            broker: parseBrokerUrl(`tcp://127.0.0.1:${await freePort()}`, ''),
          },
          platform,
        );
        app.get(DataSource).subscribers.push(failNext);
      });
      afterAll(async () => {
        await app?.close();
        await db?.drop();
      });

      /** Runs the kit on one route and expects every check to pass but `skipped` (each skipped for a reason). */
      const expectContract = async (options: IdempotencyContractOptions, skipped: string[] = []) => {
        const report = await checkIdempotencyContract(options);
        const statuses = Object.fromEntries(report.results.map((r) => [r.check, r.status]));
        const expected = Object.fromEntries(
          IDEMPOTENCY_CONTRACT_CHECKS.map((check) => [check, skipped.includes(check) ? 'skipped' : 'passed']),
        );
        expect({ statuses, failures: report.results.filter((r) => r.status === 'failed') }).toEqual({
          statuses: expected,
          failures: [],
        });
      };

      it('POST /payments passes the idempotency contract (no final error of its own: replayed-failure skipped)', () =>
        // A ValidationPipe 400 is no outcome: the handler never started.
        expectContract(
          {
            app,
            path: '/payments',
            request: () => ({ body: { reference: `inv-${randomUUID()}`, amount: 4200 } }),
            effects: () => count(Charge),
            failure: { failNext: () => failNext.arm(Charge) },
          },
          ['replayed-failure'],
        ));

      it('POST /signups passes the idempotency contract (a one-property body: reordered-body skipped)', () =>
        expectContract(
          {
            app,
            path: '/signups',
            request: () => ({ body: { email: `u-${randomUUID()}@example.com` } }),
            effects: () => count(Account),
            failure: { failNext: () => failNext.arm(Account) },
          },
          ['reordered-body', 'replayed-failure'],
        ));

      it('POST /orders passes every check of the idempotency contract, the replayed 422 included', () =>
        expectContract({
          app,
          path: '/orders',
          request: () => ({ body: { customerId: `c-${randomUUID()}`, reference: 'r-1', amount: 1500 } }),
          effects: () => count(Order),
          failure: { failNext: () => failNext.arm(Order) },
          // Over the credit limit: a 422 thrown by the handler after its writes, kept as the key's outcome.
          finalFailure: () => ({
            body: { customerId: `c-${randomUUID()}`, reference: 'r-big', amount: CREDIT_LIMIT + 1 },
          }),
        }));
    });
  }
}
