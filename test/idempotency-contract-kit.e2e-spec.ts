import {
  Body,
  Controller,
  Headers,
  HttpCode,
  Injectable,
  Post,
  Res,
  UnprocessableEntityException,
} from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { Idempotent, OutboxService } from '../src';
import {
  assertIdempotencyContract,
  checkIdempotencyContract,
  IdempotencyContractOptions,
  IdempotencyContractReport,
} from '../src/testing';
import { IdempotencyContractCheck } from '../src/testing/idempotency-contract/idempotency-contract.options';
import { TestOrder } from './fixtures/order.entity';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

/**
 * The conformance kit of `nestjs-outbox/testing`: it passes on a correct route, and each of its checks fails — with
 * a message that says what was expected, what came and the likely cause — on a route broken in that one way.
 */

/** An effect outside the database (an e-mail, a call to a payment provider): it cannot roll back. */
@Injectable()
class Mailer {
  sent = 0;
  send(): void {
    this.sent++;
  }
}

/** Makes the next handler run of the routes below throw after its effect, once. */
@Injectable()
class Faults {
  private armed = false;
  arm(): void {
    this.armed = true;
  }
  throwIfArmed(): void {
    if (!this.armed) return;
    this.armed = false;
    throw new Error('failing once, as the contract check asked');
  }
}

interface Payment {
  reference: string;
  amount: number;
  fail?: boolean;
}

/** Writes the payment in the key's transaction (OutboxService.manager): the correct route, and variants of it. */
async function record(outbox: OutboxService, faults: Faults, body: Payment, route: string) {
  if (body.amount > 1000) throw new UnprocessableEntityException(`Declined: ${body.amount} is over the limit of 1000.`);
  await outbox.manager.insert(TestOrder, { reference: `${route}:${body.reference}`, amount: body.amount });
  if (body.fail) throw new Error('failing on this request, as failingRequest() asked');
  faults.throwIfArmed();
  return { reference: body.reference, amount: body.amount };
}

@Controller()
class Routes {
  /** In-memory "already handled" map of the naive route. */
  private readonly handled = new Map<string, unknown>();

  constructor(
    private readonly outbox: OutboxService,
    private readonly faults: Faults,
    private readonly mailer: Mailer,
  ) {}

  @Post('good')
  @HttpCode(201)
  @Idempotent()
  good(@Body() body: Payment) {
    return record(this.outbox, this.faults, body, 'good');
  }

  /** Keys of at most 8 characters. */
  @Post('short-keys')
  @Idempotent({ maxKeyLength: 8 })
  shortKeys(@Body() body: Payment) {
    return record(this.outbox, this.faults, body, 'short-keys');
  }

  /** Broken: a request without a key runs unguarded. */
  @Post('optional')
  @Idempotent({ required: false })
  optional(@Body() body: Payment) {
    // transaction() joins the interceptor's, or opens one for a request without a key (which runs unguarded).
    return this.outbox.transaction(() => record(this.outbox, this.faults, body, 'optional'));
  }

  /** Broken: no @Idempotent() at all, so no replay. */
  @Post('plain')
  plain(@Body() body: Payment) {
    return this.outbox.transaction(() => record(this.outbox, this.faults, body, 'plain'));
  }

  /** Broken: a fingerprint that depends on the order of the JSON properties. */
  @Post('ordered')
  @Idempotent({ fingerprint: (request: any) => JSON.stringify(request.body) })
  ordered(@Body() body: Payment) {
    return record(this.outbox, this.faults, body, 'ordered');
  }

  /** Broken: a fingerprint that ignores the body. */
  @Post('ignores-body')
  @Idempotent({ fingerprint: (request: any) => request.url })
  ignoresBody(@Body() body: Payment) {
    return record(this.outbox, this.faults, body, 'ignores-body');
  }

  /** Broken: check-then-act in the handler, with the keys kept apart from the effect (a race between duplicates). */
  @Post('check-then-act')
  async checkThenAct(
    @Body() body: Payment,
    @Headers('idempotency-key') key: string,
    @Res({ passthrough: true }) response: any,
  ) {
    if (this.handled.has(key)) {
      (response.header ?? response.setHeader).call(response, 'Idempotent-Replayed', 'true');
      return this.handled.get(key);
    }
    await new Promise((resolve) => setTimeout(resolve, 100)); // the handler's work
    const result = await this.outbox.transaction(() => record(this.outbox, this.faults, body, 'check-then-act'));
    this.handled.set(key, result);
    return result;
  }

  /** Broken: its effect is an e-mail sent before the transaction commits. */
  @Post('outside')
  @Idempotent()
  outside(@Body() body: Payment) {
    this.mailer.send();
    return record(this.outbox, this.faults, body, 'outside');
  }

  /** Broken: a final error is not kept (replayErrors: false), so a retry runs the handler again. */
  @Post('forgets-failures')
  @Idempotent({ replayErrors: false })
  forgetsFailures(@Body() body: Payment) {
    return record(this.outbox, this.faults, body, 'forgets-failures');
  }
}

const kinds: DatabaseKind[] = ['sqlite', 'postgres'];

for (const kind of kinds) {
  for (const platform of ['express', 'fastify'] as const) {
    describeWith(servicesOf(kind), `Idempotency conformance kit on ${DATABASE_LABEL[kind]} (${platform})`, () => {
      const fx = useTestDatabase(kind);
      let app: Awaited<ReturnType<typeof fx.start>>;

      beforeAll(async () => {
        app = await fx.start({
          controllers: [Routes],
          providers: [Faults, Mailer],
          outbox: { publisher: { enabled: false } },
          logger: false,
          ...(platform === 'fastify' ? { adapter: new FastifyAdapter() } : {}),
        });
      });

      /** The options for one route: its rows in test_orders are its effects (plus e-mails, where it sends some). */
      const optionsFor = (
        route: string,
        extra: Partial<IdempotencyContractOptions> = {},
      ): IdempotencyContractOptions => ({
        app,
        path: `/${route}`,
        request: () => ({ body: { reference: randomUUID(), amount: 100 } }),
        effects: async () =>
          (await app
            .get(DataSource)
            .getRepository(TestOrder)
            .createQueryBuilder('o')
            .where('o.reference LIKE :prefix', { prefix: `${route}:%` })
            .getCount()) + app.get(Mailer).sent,
        failure: { failNext: () => app.get(Faults).arm() },
        finalFailure: () => ({ body: { reference: randomUUID(), amount: 5000 } }),
        ...extra,
      });

      const resultOf = (report: IdempotencyContractReport, check: IdempotencyContractCheck) =>
        report.results.find((r) => r.check === check)!;

      /** Runs one check on a broken route: it must fail, with a message matching `message`. */
      async function expectFailure(
        route: string,
        check: IdempotencyContractCheck,
        message: RegExp,
        extra?: Partial<IdempotencyContractOptions>,
      ) {
        app.get(Mailer).sent = 0;
        const report = await checkIdempotencyContract(optionsFor(route, extra), [check]);
        expect(report.passed).toBe(false);
        expect(resultOf(report, check)).toEqual({
          check,
          title: expect.any(String),
          status: 'failed',
          message: expect.stringMatching(message),
        });
      }

      it('passes every check on a correct route (failNext hook)', async () => {
        app.get(Mailer).sent = 0;
        const report = await checkIdempotencyContract(optionsFor('good'));
        expect(report.results.map((r) => [r.check, r.status, r.message])).toEqual(
          report.results.map((r) => [r.check, 'passed', undefined]),
        );
        expect(report).toMatchObject({ route: 'POST /good', passed: true });
        expect(report.results).toHaveLength(7);
      });

      it("refuses a key longer than the route's maxKeyLength with 400 problem+json", async () => {
        if (!app.getHttpServer().listening) await app.listen(0, '127.0.0.1');
        const url = new URL('/short-keys', await app.getUrl()).toString().replace('[::1]', '127.0.0.1');
        const send = (key: string) =>
          fetch(url, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'idempotency-key': key },
            body: JSON.stringify({ reference: randomUUID(), amount: 1 }),
          });
        const long = await send('123456789');
        expect(long.status).toBe(400);
        expect(long.headers.get('content-type')).toMatch(/^application\/problem\+json/);
        expect(await long.json()).toMatchObject({
          code: 'idempotency-key-invalid',
          detail: expect.stringMatching(/must hold 1 to 8 characters; this one has 9/),
        });
        expect((await send('12345678')).status).toBe(201);
      });

      it('passes rollback-frees-key with a failingRequest instead of a hook', async () => {
        const report = await checkIdempotencyContract(
          optionsFor('good', {
            failure: { failingRequest: () => ({ body: { reference: randomUUID(), amount: 100, fail: true } }) },
          }),
          ['rollback-frees-key'],
        );
        expect(report.results).toEqual([expect.objectContaining({ check: 'rollback-frees-key', status: 'passed' })]);
      });

      it('skips, and says why, the checks whose options are missing', async () => {
        const report = await checkIdempotencyContract(
          optionsFor('good', {
            failure: undefined,
            finalFailure: undefined,
            request: () => ({ body: { reference: randomUUID() } }),
            skip: ['missing-key'],
          }),
          ['missing-key', 'reordered-body', 'rollback-frees-key', 'replayed-failure'],
        );
        expect(report.passed).toBe(true);
        expect(report.results.map((r) => [r.check, r.status])).toEqual([
          ['missing-key', 'skipped'],
          ['reordered-body', 'skipped'],
          ['rollback-frees-key', 'skipped'],
          ['replayed-failure', 'skipped'],
        ]);
        expect(resultOf(report, 'reordered-body').message).toMatch(/at least two properties/);
        expect(resultOf(report, 'rollback-frees-key').message).toMatch(/failNext.*failingRequest/);
      });

      it('missing-key fails on a route that does not require the key', async () => {
        await expectFailure(
          'optional',
          'missing-key',
          /without Idempotency-Key must get 400 application\/problem\+json .*"idempotency-key-missing", got 201/,
        );
      });

      it('replay fails on a route that does not replay', async () => {
        await expectFailure(
          'plain',
          'replay',
          /same key and body must get the first response again, marked Idempotent-Replayed: true\. .*does not replay/,
        );
      });

      it('reordered-body fails on a fingerprint that depends on the property order', async () => {
        await expectFailure(
          'ordered',
          'reordered-body',
          /body reordered must get the first response again.*: 422 .*stable serialization/,
        );
      });

      it('mismatch fails on a route that ignores the body', async () => {
        await expectFailure(
          'ignores-body',
          'mismatch',
          /different body must get 422 .*"idempotency-key-reused", got 201 .*Idempotent-Replayed: true.*fingerprint ignores the body/,
        );
      });

      it('concurrent-duplicates fails on check-then-act idempotency', async () => {
        await expectFailure(
          'check-then-act',
          'concurrent-duplicates',
          /8 concurrent duplicates must get exactly one original response .*got 8 not marked Idempotent-Replayed/,
        );
      });

      it('rollback-frees-key fails on a route whose effect is outside the transaction', async () => {
        await expectFailure(
          'outside',
          'rollback-frees-key',
          /effects\(\) went from \d+ to \d+ after a request that failed with 500; expected \d+\. .*writes outside the transaction/,
        );
      });

      it('replayed-failure fails on a route that does not keep its final errors', async () => {
        await expectFailure(
          'forgets-failures',
          'replayed-failure',
          /retry of a request that failed with a final error must get the first response again.*: 422 \(application\/json.*\).*not kept as the outcome of the key/,
        );
      });

      it('the checks fail on a route without @Idempotent(), and assertIdempotencyContract() lists them', async () => {
        const failure = await assertIdempotencyContract(optionsFor('plain')).catch((error: Error) => error);
        expect(failure).toBeInstanceOf(Error);
        const lines = (failure as Error).message.split('\n');
        expect(lines[0]).toBe('The idempotency contract of POST /plain is broken:');
        for (const check of ['missing-key', 'replay', 'reordered-body', 'mismatch', 'concurrent-duplicates']) {
          expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^✗ POST /plain ${check}: `)));
        }
      });
    });
  }
}
