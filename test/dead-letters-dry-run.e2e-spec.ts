import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OnOutboxEvent, OutboxDeadLetters, OutboxEventContext, OutboxMessage, OutboxService } from '../src';
import { OutboxDeadLetterQueryError, OutboxInTransactionError } from '../src/errors';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { TestOrder } from './fixtures/order.entity';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

/** A payment gateway's refusal, carrying a credential in its text like a driver's error might. */
class PaymentDeclinedError extends Error {
  override name = 'PaymentDeclinedError';
}

/** The handler being tried: writes an order, emits a follow-up event, and still fails for the first 3 refs. */
@Injectable()
class ChargeHandler {
  readonly runs: Array<{ ref: number; dryRun: boolean | undefined; attempts: number }> = [];

  constructor(private readonly outbox: OutboxService) {}

  @OnOutboxEvent('Charge')
  async charge(payload: { ref: number }, context: OutboxEventContext): Promise<void> {
    this.runs.push({ ref: payload.ref, dryRun: context.dryRun, attempts: context.attempts });
    // Effects first, so that a failure after them (and a success) proves the rollback.
    await this.outbox.manager.insert(TestOrder, { reference: `charge-${payload.ref}`, amount: payload.ref });
    await this.outbox.emit('Charged', { ref: payload.ref });
    if (payload.ref < 3) {
      throw new PaymentDeclinedError(`card declined for order ${payload.ref} (password=hunter2-gateway)`);
    }
  }
}

const DEAD = 10;
const STILL_FAILING = 3;

for (const kind of ['postgres', 'mariadb', 'sqlite'] as DatabaseKind[]) {
  describeWith(servicesOf(kind), `Dead-letter dry run of in-process handlers on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useOutboxApp(kind, {
      logger: false,
      providers: [ChargeHandler],
      outbox: { client: undefined, publisher: { enabled: false } },
    });
    const ids = Array.from({ length: DEAD }, (_, i) => `charge-${kind}-${i}`);
    /** Everything a dry run must leave as it was: every outbox row, the handler's effects, its records. */
    const snapshot = async () => {
      const ds = fx.app.get(DataSource);
      const rows = await ds.getRepository(OutboxMessage).find({ order: { seq: 'ASC' } });
      return {
        rows: rows.map((r) => [r.messageId, r.destination, r.status, r.attempts, r.lastError, r.deadAt?.getTime()]),
        orders: await ds.getRepository(TestOrder).count(),
        records: await ds.getRepository(IdempotencyRecord).count(),
      };
    };

    beforeAll(async () => {
      const rows = ids.map((messageId, ref) => ({
        messageId,
        pattern: 'Charge',
        payload: JSON.stringify({ ref }),
        status: 'dead',
        attempts: 5,
        availableAt: new Date(1_000_000),
        createdAt: new Date(1_000_000 + ref),
        deadAt: new Date(2_000_000 + ref),
        lastError:
          ref < 5
            ? `OutboxHandlerFailedError: In-process handler ChargeHandler.charge failed: gateway timed out after ${ref}ms`
            : `OutboxHandlerFailedError: In-process handler ChargeHandler.charge failed: order ${ref} not found`,
      }));
      await fx.app
        .get(DataSource)
        .getRepository(OutboxMessage)
        .insert(rows as never);
    });

    it(`tries ${DEAD} dead messages: ${DEAD - STILL_FAILING} ok, ${STILL_FAILING} errors, nothing committed (${DATABASE_LABEL[kind]})`, async () => {
      const before = await snapshot();
      expect(before.rows).toHaveLength(DEAD);
      const handler = fx.app.get(ChargeHandler);
      handler.runs.length = 0;

      const trial = await fx.app.get(OutboxDeadLetters).dryRun();

      expect({ tried: trial.tried, ok: trial.ok, failed: trial.failed, complete: trial.complete }).toEqual({
        tried: DEAD,
        ok: DEAD - STILL_FAILING,
        failed: STILL_FAILING,
        complete: true,
      });
      // Newest death first, as a page lists them.
      expect(trial.results.map((r) => r.messageId)).toEqual([...ids].reverse());
      for (const result of trial.results) {
        const ref = ids.indexOf(result.messageId);
        expect(result).toMatchObject({ pattern: 'Charge', destination: '', attempts: 5, ok: ref >= STILL_FAILING });
        expect(result.targets).toHaveLength(1);
        const [target] = result.targets;
        expect(target).toMatchObject({ kind: 'handler', destination: 'handler:ChargeHandler.charge' });
        if (ref >= STILL_FAILING) {
          expect(target).toEqual({
            kind: 'handler',
            destination: 'handler:ChargeHandler.charge',
            ok: true,
            outcome: 'ran',
          });
        } else {
          expect(target.ok).toBe(false);
          expect(target.error!.errorClass).toBe('PaymentDeclinedError');
          expect(target.error!.message).toBe(`card declined for order ${ref} (password=***)`);
        }
      }
      expect(JSON.stringify(trial)).not.toContain('hunter2');
      expect(JSON.stringify(trial)).not.toMatch(/\bat .+:\d+:\d+/); // no stack frame
      // The handler really ran, each time told it is a dry run, as the first attempt after a requeue.
      expect(handler.runs.map((r) => r.ref).sort((a, b) => a - b)).toEqual(ids.map((_, i) => i));
      expect(handler.runs.every((r) => r.dryRun === true && r.attempts === 1)).toBe(true);

      // Nothing committed: the same rows in the same states and attempts, no order, no emitted row, no record.
      expect(await snapshot()).toEqual(before);
      expect(before.orders).toBe(0);
      expect(before.records).toBe(0);
    });

    it(`takes requeue()'s selectors: ids, a failure group, a filter, a limit (${DATABASE_LABEL[kind]})`, async () => {
      const before = await snapshot();
      const deadLetters = fx.app.get(OutboxDeadLetters);

      const one = await deadLetters.dryRun([ids[1], ids[7]]);
      expect(one.results.map((r) => [r.messageId, r.ok])).toEqual([
        [ids[7], true],
        [ids[1], false],
      ]);

      const { groups } = await deadLetters.groups();
      const timeouts = groups.find((g) => g.message.includes('timed out'))!;
      expect(timeouts.count).toBe(5);
      const byGroup = await deadLetters.dryRun({ group: timeouts.group });
      expect(byGroup.results.map((r) => r.messageId).sort()).toEqual(ids.slice(0, 5).sort());
      expect([byGroup.ok, byGroup.failed]).toEqual([2, 3]);

      const filtered = await deadLetters.dryRun({ messageIds: [ids[0], ids[9]], pattern: 'Charge' });
      expect(filtered.tried).toBe(2);
      expect((await deadLetters.dryRun({ pattern: 'Other' })).tried).toBe(0);

      const limited = await deadLetters.dryRun(undefined, { limit: 4 });
      expect({ tried: limited.tried, complete: limited.complete }).toEqual({ tried: 4, complete: false });
      expect(limited.results.map((r) => r.messageId)).toEqual([ids[9], ids[8], ids[7], ids[6]]);

      await expect(deadLetters.dryRun({ patern: 'Charge' } as never)).rejects.toThrow(OutboxDeadLetterQueryError);
      await expect(deadLetters.dryRun(undefined, { limit: 0 })).rejects.toThrow(/limit must be an integer/);
      await expect(fx.outbox.transaction(() => deadLetters.dryRun())).rejects.toThrow(OutboxInTransactionError);
      expect(await snapshot()).toEqual(before);
    });

    it(`a message whose handler is gone, or that expired, fails its trial (${DATABASE_LABEL[kind]})`, async () => {
      const repository = fx.app.get(DataSource).getRepository(OutboxMessage);
      await repository.insert({
        messageId: `gone-${kind}`,
        pattern: 'Charge',
        destination: 'handler:RemovedHandler.charge',
        payload: '{"ref":5}',
        status: 'dead',
        attempts: 3,
        availableAt: new Date(1_000_000),
        createdAt: new Date(1_000_000),
        deadAt: new Date(3_000_000),
        lastError: 'OutboxNoDestinationError: gone',
      } as never);
      const trial = await fx.app.get(OutboxDeadLetters).dryRun([`gone-${kind}`]);
      expect(trial.results).toHaveLength(1);
      expect(trial.results[0]).toMatchObject({
        ok: false,
        targets: [],
        error: { errorClass: 'OutboxNoDestinationError' },
      });
      expect(trial.results[0].error!.message).toContain("no @OnOutboxEvent('Charge') handler is named");

      // An expired message would go dead again at once: reported, the handler not run.
      await repository.insert({
        messageId: `expired-${kind}`,
        pattern: 'Charge',
        payload: '{"ref":6}',
        status: 'dead',
        attempts: 1,
        availableAt: new Date(1_000_000),
        createdAt: new Date(1_000_000),
        expiresAt: new Date(1_500_000),
        deadAt: new Date(3_000_001),
        lastError: 'OutboxMessageExpiredError: expired',
      } as never);
      const handler = fx.app.get(ChargeHandler);
      handler.runs.length = 0;
      const expired = await fx.app.get(OutboxDeadLetters).dryRun([`expired-${kind}`]);
      expect(expired.results[0]).toMatchObject({ ok: false, error: { errorClass: 'OutboxMessageExpiredError' } });
      expect(expired.results[0].error!.message).toContain('a requeue would make it dead again at once');
      expect(handler.runs).toEqual([]);
    });
  });
}
