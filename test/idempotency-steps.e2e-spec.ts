import {
  Body,
  Controller,
  HttpException,
  HttpStatus,
  INestApplication,
  InternalServerErrorException,
  Post,
} from '@nestjs/common';
import { HTTP_PLATFORMS, listenHttpApp } from './fixtures/http-app';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { Idempotent, idempotentStep, OutboxService } from '../src';
import {
  IdempotentStepOrderError,
  IdempotentStepOutsideCallError,
  IdempotentStepResultError,
} from '../src/idempotency/steps/step-scope';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { IdempotencyStep } from '../src/schema/idempotency-step.entity';
import { IDEMPOTENCY_STEPS_CLEANUP_TASK } from '../src/idempotency/idempotency.service';
import { OutboxCleanupRegistry } from '../src/scheduling/outbox-cleanup.registry';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { TestOrder } from './fixtures/order.entity';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { describeWith } from './helpers/services';

/** A payment provider outside the database: counts its calls and, like a real one, deduplicates by idempotency key. */
class FakeProvider {
  /** The step key of every call, in order. */
  readonly calls: string[] = [];
  private readonly charges = new Map<string, { id: string; amount: number }>();
  /** Calls wait for this while it is set (to keep a step running). */
  hold?: Promise<void>;
  /** How many of the next calls fail (a timeout of the provider). */
  failures = 0;

  async charge(stepKey: string, amount: number): Promise<{ id: string; amount: number }> {
    this.calls.push(stepKey);
    if (this.hold) await this.hold;
    if (this.failures > 0) {
      this.failures--;
      throw new InternalServerErrorException('the provider timed out');
    }
    let charge = this.charges.get(stepKey);
    if (!charge) this.charges.set(stepKey, (charge = { id: `ch_${this.charges.size + 1}`, amount }));
    return charge;
  }

  callsOf(stepKey: string): number {
    return this.calls.filter((k) => k === stepKey).length;
  }
}

const provider = new FakeProvider();
/** Step keys seen by the callbacks, by step name (only when a callback ran). */
const seenKeys: Record<string, string[]> = {};
/** Makes the next runs fail after their steps (as a crash would, but in process). */
const state: { failAfterSteps: number; lastError?: Error; parallelRuns: number } = {
  failAfterSteps: 0,
  parallelRuns: 0,
};

class Money {
  constructor(
    readonly cents: number,
    readonly currency: string,
  ) {}
  get label(): string {
    return `${this.cents} ${this.currency}`;
  }
}

interface CheckoutDto {
  reference: string;
  amount: number;
}

function chargeStep(name: string, amount: number) {
  return idempotentStep(name, (stepKey) => {
    (seenKeys[name] ??= []).push(stepKey);
    return provider.charge(stepKey, amount);
  });
}

function failIfAsked(): void {
  if (state.failAfterSteps > 0) {
    state.failAfterSteps--;
    throw new InternalServerErrorException('failed after the steps');
  }
}

@Controller('shop')
class ShopController {
  constructor(private readonly outbox: OutboxService) {}

  /** Two steps, then the effect: the usual order (and the only one SQLite allows). */
  @Post('checkout')
  @Idempotent()
  async checkout(@Body() dto: CheckoutDto) {
    const charge = await chargeStep('charge', dto.amount);
    const fee = await chargeStep('fee', 1);
    failIfAsked();
    await this.outbox.manager.save(TestOrder, { reference: dto.reference, amount: dto.amount });
    return { reference: dto.reference, charge, fee };
  }

  /** Writes, then calls a step: fine on PostgreSQL and MariaDB, refused on SQLite. */
  @Post('write-then-step')
  @Idempotent()
  async writeThenStep(@Body() dto: CheckoutDto) {
    await this.outbox.manager.save(TestOrder, { reference: dto.reference, amount: dto.amount });
    const charge = await chargeStep('charge', dto.amount).catch((error: Error) => {
      state.lastError = error;
      throw error;
    });
    failIfAsked();
    return { reference: dto.reference, charge };
  }

  /** A declined charge is the request's outcome: the step records it, the handler answers 402 (kept and replayed). */
  @Post('declined')
  @Idempotent()
  async declined(@Body() dto: CheckoutDto) {
    const outcome = await idempotentStep('charge', async (stepKey) => {
      await provider.charge(stepKey, dto.amount);
      return { declined: true, code: 'insufficient_funds' };
    });
    throw new HttpException(outcome, HttpStatus.PAYMENT_REQUIRED);
  }

  /** What a step's result turns into. */
  @Post('types')
  @Idempotent()
  async types(@Body() dto: CheckoutDto) {
    const value = await idempotentStep('types', async (stepKey) => {
      await provider.charge(stepKey, dto.amount);
      return {
        when: new Date(Date.UTC(2026, 11, 1)),
        money: new Money(250, 'EUR'),
        notANumber: NaN,
        list: [1, 'two', null, true, undefined],
        dropped: undefined,
        nested: { deep: { x: 1.5 } },
      };
    });
    failIfAsked();
    const nothing = await idempotentStep('nothing', () => undefined);
    return {
      value,
      whenType: typeof value.when,
      moneyIsInstance: value.money instanceof Money,
      hasDropped: 'dropped' in value,
      nothing: nothing === undefined ? 'undefined' : typeof nothing,
    };
  }

  /** Two steps started together, and a name used twice: they run one after another, the second name once. */
  @Post('parallel')
  @Idempotent()
  async parallel() {
    const overlap = { running: 0, max: 0 };
    const slow = (label: string) => async () => {
      overlap.running++;
      overlap.max = Math.max(overlap.max, overlap.running);
      await new Promise((resolve) => setTimeout(resolve, 30));
      overlap.running--;
      return `${label}:${++state.parallelRuns}`;
    };
    const [a, b, again] = await Promise.all([
      idempotentStep('a', slow('a')),
      idempotentStep('b', slow('b')),
      idempotentStep('a', slow('a-again')),
    ]);
    return { a, b, again, maxConcurrent: overlap.max };
  }

  @Post('bigint')
  @Idempotent()
  async bigint() {
    try {
      await idempotentStep('big', () => ({ amount: 10n }));
    } catch (error) {
      return { error: (error as Error).name };
    }
    return { error: null };
  }
}

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

it('idempotentStep() outside an idempotent call throws IdempotentStepOutsideCallError', () => {
  expect(() => idempotentStep('charge', () => 1)).toThrow(IdempotentStepOutsideCallError);
});

for (const kind of kinds) {
  for (const platform of HTTP_PLATFORMS) {
    const title = `idempotentStep() resumes a key's steps (${platform}) on ${DATABASE_LABEL[kind]}`;
    describeWith(servicesOf(kind), title, () => {
      let db: TestDatabase;
      let app: INestApplication;
      let ds: DataSource;
      let url: string;
      let n = 0;
      const newKey = () => `step-${platform}-${Date.now().toString(36)}-${n++}`;

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        const moduleRef = await createOutboxTestingModule({
          db,
          controllers: [ShopController],
          outbox: { publisher: { enabled: false } },
        });
        ({ app, url } = await listenHttpApp(moduleRef, platform));
        ds = app.get(DataSource);
      });

      afterAll(async () => {
        await app?.close();
        await db?.drop();
      });

      beforeEach(() => {
        state.failAfterSteps = 0;
        state.lastError = undefined;
        provider.failures = 0;
        provider.hold = undefined;
        for (const name of Object.keys(seenKeys)) delete seenKeys[name];
      });

      const post = (path: string, body: object, key: string) =>
        request(url).post(`/shop/${path}`).set('Idempotency-Key', key).send(body);
      const effects = (reference: string) => ds.getRepository(TestOrder).countBy({ reference });
      const steps = (key: string) => ds.getRepository(IdempotencyStep).findBy({ key });

      it('a run that failed after its steps is resumed: the steps are not called again, the response is a single run’s', async () => {
        const key = newKey();
        const body = { reference: `R-${key}`, amount: 40 };
        state.failAfterSteps = 1;
        const failed = await post('checkout', body, key);
        expect(failed.status).toBe(500);
        expect(await effects(body.reference)).toBe(0); // the effect rolled back…
        expect((await steps(key)).map((s) => s.step).sort()).toEqual(['charge', 'fee']); // …the steps stayed
        const [chargeKey, feeKey] = [seenKeys.charge[0], seenKeys.fee[0]];

        const resumed = await post('checkout', body, key);
        expect(resumed.status).toBe(201);
        expect(seenKeys.charge).toHaveLength(1); // no second call
        expect(seenKeys.fee).toHaveLength(1);
        expect(provider.callsOf(chargeKey)).toBe(1);
        expect(provider.callsOf(feeKey)).toBe(1);
        expect(await effects(body.reference)).toBe(1);

        // What a run without failure gives, for another key: the same shape, its own charges.
        const single = await post('checkout', { ...body, reference: `S-${key}` }, `${key}-single`);
        expect(single.status).toBe(201);
        expect(resumed.body).toEqual({
          reference: body.reference,
          charge: { id: expect.stringMatching(/^ch_\d+$/), amount: 40 },
          fee: { id: expect.stringMatching(/^ch_\d+$/), amount: 1 },
        });
        expect(Object.keys(single.body)).toEqual(Object.keys(resumed.body));

        const replayed = await post('checkout', body, key);
        expect(replayed.headers['idempotent-replayed']).toBe('true');
        expect(replayed.body).toEqual(resumed.body);
        expect(provider.callsOf(chargeKey)).toBe(1);
        expect(await ds.getRepository(IdempotencyRecord).countBy({ key })).toBe(1);
      });

      it('hands each step a key of its own, derived per (key, step), the same on every retry', async () => {
        const key = newKey();
        const body = { reference: `K-${key}`, amount: 5 };
        provider.failures = 1; // the first charge fails: not recorded, so the retry calls again
        expect((await post('checkout', body, key)).status).toBe(500);
        expect(await steps(key)).toHaveLength(0);
        expect((await post('checkout', body, key)).status).toBe(201);
        const [first, second] = seenKeys.charge;
        expect(first).toMatch(/^[0-9a-f]{64}$/);
        expect(second).toBe(first); // the provider sees the same key again and can deduplicate
        expect(seenKeys.fee[0]).not.toBe(first); // another step, another key
        expect(provider.callsOf(first)).toBe(2);

        await post('checkout', { ...body, reference: `K2-${key}` }, `${key}-other`);
        expect(seenKeys.charge[2]).not.toBe(first); // another idempotency key, another step key
      });

      it('a retry with another request and the key of an unfinished run is refused (422) before any step', async () => {
        const key = newKey();
        state.failAfterSteps = 1;
        expect((await post('checkout', { reference: `F-${key}`, amount: 7 }, key)).status).toBe(500);
        const answer = await post('checkout', { reference: `F-${key}`, amount: 8 }, key);
        expect(answer.status).toBe(422);
        expect(seenKeys.charge).toHaveLength(1);
      });

      it('a step that records a decline, then a 402: the failure is kept and replayed, the provider called once', async () => {
        const key = newKey();
        const first = await post('declined', { reference: `D-${key}`, amount: 9 }, key);
        expect(first.status).toBe(402);
        expect(first.body).toEqual({ declined: true, code: 'insufficient_funds' });
        const retried = await post('declined', { reference: `D-${key}`, amount: 9 }, key);
        expect(retried.status).toBe(402);
        expect(retried.headers['idempotent-replayed']).toBe('true');
        expect(retried.body).toEqual(first.body);
        expect(provider.calls.filter((k) => k === provider.calls.at(-1))).toHaveLength(1);
      });

      it('stores a result as JSON and hands back the same value on the first run and on a resumed one', async () => {
        const key = newKey();
        const body = { reference: `T-${key}`, amount: 3 };
        state.failAfterSteps = 1;
        expect((await post('types', body, key)).status).toBe(500);
        const callsBefore = provider.calls.length;
        const resumed = await post('types', body, key);
        const fresh = await post('types', body, `${key}-fresh`);
        expect(provider.calls.length).toBe(callsBefore + 1); // only the fresh key called the provider
        const expected = {
          value: {
            when: '2026-12-01T00:00:00.000Z',
            money: { cents: 250, currency: 'EUR' },
            notANumber: null,
            list: [1, 'two', null, true, null],
            nested: { deep: { x: 1.5 } },
          },
          whenType: 'string',
          moneyIsInstance: false,
          hasDropped: false,
          nothing: 'undefined',
        };
        expect(resumed.body).toEqual(expected);
        expect(fresh.body).toEqual(expected);
      });

      it('steps of one call started together run one after another; a name already done returns its result', async () => {
        state.parallelRuns = 0;
        const answer = await post('parallel', {}, newKey());
        expect(answer.status).toBe(201);
        expect(answer.body).toEqual({ a: 'a:1', b: 'b:2', again: 'a:1', maxConcurrent: 1 });
        expect(state.parallelRuns).toBe(2);
      });

      it('an expired step is run again and replaced; the cleanup task deletes expired steps in batches', async () => {
        const key = newKey();
        const body = { reference: `E-${key}`, amount: 6 };
        state.failAfterSteps = 1;
        expect((await post('checkout', body, key)).status).toBe(500);
        const repo = ds.getRepository(IdempotencyStep);
        await repo.update({ key }, { expiresAt: new Date(1000) }); // both steps expired
        expect((await post('checkout', body, key)).status).toBe(201);
        expect(seenKeys.charge).toHaveLength(2); // called again: an expired result is not trusted
        expect(seenKeys.charge[1]).toBe(seenKeys.charge[0]); // with the same step key
        expect((await repo.findBy({ key })).every((s) => s.expiresAt.getTime() > Date.now())).toBe(true);

        await repo.update({ key }, { expiresAt: new Date(1000) });
        const task = app
          .get(OutboxCleanupRegistry)
          .all()
          .find((t) => t.name === IDEMPOTENCY_STEPS_CLEANUP_TASK);
        expect(task).toBeDefined();
        const live = await repo.count();
        expect(await task!.deleteBatch(1)).toBe(1);
        expect(await task!.deleteBatch(5)).toBe(1);
        expect(await task!.deleteBatch(5)).toBe(0);
        expect(await repo.countBy({ key })).toBe(0);
        expect(await repo.count()).toBe(live - 2); // live steps of other keys stay
      });

      it('a result that JSON cannot hold (BigInt) throws IdempotentStepResultError', async () => {
        const answer = await post('bigint', {}, newKey());
        expect(answer.body).toEqual({ error: IdempotentStepResultError.name });
      });

      if (kind === 'sqlite') {
        it('on SQLite a step after the handler wrote is refused before it runs (IdempotentStepOrderError)', async () => {
          const key = newKey();
          const answer = await post('write-then-step', { reference: `W-${key}`, amount: 2 }, key);
          expect(answer.status).toBe(500);
          expect(seenKeys.charge).toBeUndefined(); // the provider was not called
          expect(await effects(`W-${key}`)).toBe(0);
          expect(state.lastError?.name).toBe(IdempotentStepOrderError.name);
        });
      } else {
        it('a step after a write: the write rolls back with a failed run, the step stays and is resumed', async () => {
          const key = newKey();
          const body = { reference: `W-${key}`, amount: 2 };
          state.failAfterSteps = 1;
          expect((await post('write-then-step', body, key)).status).toBe(500);
          expect(await effects(body.reference)).toBe(0);
          const answer = await post('write-then-step', body, key);
          expect(answer.status).toBe(201);
          expect(seenKeys.charge).toHaveLength(1);
          expect(await effects(body.reference)).toBe(1);
        });

        it('concurrent requests with one key run each step once (the others get 409, then the replay)', async () => {
          const key = newKey();
          const body = { reference: `C-${key}`, amount: 11 };
          let release!: () => void;
          provider.hold = new Promise<void>((r) => (release = r));
          const first = post('checkout', body, key).then((r) => r);
          await waitUntil(() => (seenKeys.charge?.length ?? 0) === 1);
          const others = await Promise.all(Array.from({ length: 6 }, () => post('checkout', body, key)));
          release();
          const winner = await first;
          expect(winner.status).toBe(201);
          for (const other of others) expect(other.status).toBe(409);
          expect(seenKeys.charge).toHaveLength(1);
          const after = await Promise.all(Array.from({ length: 4 }, () => post('checkout', body, key)));
          for (const a of after) expect(a.body).toEqual(winner.body);
          expect(seenKeys.charge).toHaveLength(1);
          expect(await effects(body.reference)).toBe(1);
        });

        it('concurrent retries of a run that failed after its steps resume it once, without calling again', async () => {
          const key = newKey();
          const body = { reference: `CR-${key}`, amount: 12 };
          state.failAfterSteps = 1;
          expect((await post('checkout', body, key)).status).toBe(500);
          const answers = await Promise.all(Array.from({ length: 8 }, () => post('checkout', body, key)));
          const ok = answers.filter((a) => a.status === 201);
          expect(ok.length).toBeGreaterThanOrEqual(1);
          for (const a of answers) expect([201, 409]).toContain(a.status);
          for (const a of ok) expect(a.body).toEqual(ok[0].body);
          expect(seenKeys.charge).toHaveLength(1);
          expect(seenKeys.fee).toHaveLength(1);
          expect(await effects(body.reference)).toBe(1);
        });
      }
    });
  }
}

async function waitUntil(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}
