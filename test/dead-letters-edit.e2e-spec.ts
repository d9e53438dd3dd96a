import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OnOutboxEvent, OutboxDeadLetters, OutboxEventContext, OutboxMessage } from '../src';
import {
  OutboxEditDisabledError,
  OutboxEditInvalidError,
  OutboxInTransactionError,
  OutboxMessageNotFoundError,
  OutboxNotDeadError,
} from '../src/errors';
import { OutboxDatabase } from '../src/dialects/outbox-database';
import { OutboxAttempt } from '../src/schema/outbox-attempt.entity';
import { runInTransaction } from '../src/transaction/transaction-runner';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

/** Records every invoice it is given, in order: what the relay delivered after an edit. */
@Injectable()
class InvoiceHandler {
  readonly seen: Array<{ messageId: string; key: string | null; payload: unknown; headers: Record<string, string> }> =
    [];

  @OnOutboxEvent('Invoice')
  handle(payload: unknown, context: OutboxEventContext): void {
    this.seen.push({ messageId: context.messageId, key: context.key, payload, headers: { ...context.headers } });
  }
}

/** Resolves once `check()` holds (polled), or fails after `ms`. */
async function eventually(check: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

const row = (messageId: string, key: string, status: 'dead' | 'pending', payload: object, headers?: object) => ({
  messageId,
  pattern: 'Invoice',
  key,
  payload: JSON.stringify(payload),
  headers: headers ? JSON.stringify(headers) : null,
  status,
  attempts: status === 'dead' ? 5 : 0,
  availableAt: new Date(status === 'dead' ? 1_000_000 : Date.now() + 3_600_000),
  createdAt: new Date(1_000_000),
  deadAt: status === 'dead' ? new Date(2_000_000) : undefined,
  lastError: status === 'dead' ? 'VatRejectedError: VAT id rejected (token=gw-secret-1)' : null,
});

for (const kind of ['postgres', 'mariadb', 'sqlite'] as DatabaseKind[]) {
  describeWith(servicesOf(kind), `Edit-and-requeue of dead letters on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useOutboxApp(kind, {
      logger: false,
      providers: [InvoiceHandler],
      outbox: {
        client: undefined,
        publisher: { pollingInterval: 50 },
        deadLetters: { allowEdit: true },
      },
    });
    const repo = () => fx.app.get(DataSource).getRepository(OutboxMessage);
    const deadLetters = () => fx.app.get(OutboxDeadLetters);

    it(`publishes the corrected copy in the original's place in its key's order and keeps the original, marked and audited (${DATABASE_LABEL[kind]})`, async () => {
      const handler = fx.app.get(InvoiceHandler);
      const original = `inv-${kind}-1`;
      // The dead invoice holds back the later one of its key, as any dead letter does.
      await repo().insert([
        row(
          original,
          'cust-1',
          'dead',
          { vat: 'XX-bad', amount: 10, card: { password: 'pw-original' } },
          { tenant: 't1', authorization: 'Bearer tok-original' },
        ),
        { ...row(`inv-${kind}-2`, 'cust-1', 'pending', { vat: 'FR-2', amount: 20 }), availableAt: new Date(1_000_000) },
      ] as never);
      const dead = await repo().findOneByOrFail({ messageId: original });
      await fx.app
        .get(DataSource)
        .getRepository(OutboxAttempt)
        .insert(
          [1, 2].map((attempt) => ({
            messageSeq: dead.seq,
            attempt,
            failedAt: 1_500_000 + attempt,
            counted: true,
            error: `VatRejectedError: attempt ${attempt}`,
            owner: 'o',
            publisher: 'p',
          })) as never,
        );
      await new Promise((r) => setTimeout(r, 300));
      expect(handler.seen).toEqual([]); // the later invoice waits behind the dead one

      const result = await deadLetters().editAndRequeue(original, {
        payload: { vat: 'FR-1', amount: 10, card: { password: 'pw-fixed' } },
        reason: 'VAT id corrected by the customer',
        actor: 'ops:ana',
      });

      expect(result.messageId).not.toBe(original);
      expect(result.replacedBy).toBe(result.messageId);
      await eventually(() => handler.seen.length === 2);
      // The copy first, then the invoice it was holding back: per-key order holds.
      expect(handler.seen.map((s) => s.messageId)).toEqual([result.messageId, `inv-${kind}-2`]);
      expect(handler.seen[0]).toMatchObject({
        key: 'cust-1',
        payload: { vat: 'FR-1', amount: 10, card: { password: 'pw-fixed' } },
        headers: { tenant: 't1', authorization: 'Bearer tok-original', 'x-outbox-replaces': original },
      });

      // The original is kept as it was, marked replaced, with its history; no longer a dead letter.
      const kept = await repo().findOneByOrFail({ messageId: original });
      expect(kept).toMatchObject({ status: 'replaced', attempts: 5, key: 'cust-1', payload: dead.payload });
      expect(kept.lastError).toBe(dead.lastError);
      expect(kept.deadAt?.getTime()).toBe(2_000_000);
      const shown = await deadLetters().get(original);
      expect(shown).toMatchObject({ status: 'replaced', replacedBy: result.messageId, replaces: null });
      expect(shown!.history.map((h) => h.error)).toEqual([
        'VatRejectedError: attempt 1',
        'VatRejectedError: attempt 2',
      ]);
      expect(await deadLetters().count()).toBe(0);
      expect((await fx.outbox.stats()).dead).toBe(0);
      expect((await deadLetters().page()).items).toEqual([]);

      // The audit: who, when, why, what — the same from either id, with no credential in it.
      const audit = shown!.edit!;
      expect(audit).toMatchObject({
        replaces: original,
        replacedBy: result.messageId,
        destinations: [''],
        actor: 'ops:ana',
        reason: 'VAT id corrected by the customer',
        truncated: false,
      });
      expect(audit.changes).toEqual([
        { field: 'payload', path: '/card/password', before: '"***"', after: '"***"' },
        { field: 'payload', path: '/vat', before: '"XX-bad"', after: '"FR-1"' },
      ]);
      expect(Math.abs(audit.editedAt - Date.now())).toBeLessThan(120_000);
      expect(audit).toEqual(result.audit);
      const copy = await deadLetters().get(result.messageId);
      expect(copy).toMatchObject({ replaces: original, replacedBy: null, edit: audit });
      expect(JSON.stringify(await repo().findOneByOrFail({ messageId: original }))).not.toContain('pw-fixed');
      expect(JSON.stringify(audit)).not.toMatch(/pw-original|pw-fixed|tok-original/);

      // The trace shows the original's row as replaced, the copy as a message of its own.
      expect((await fx.outbox.trace(original)).message).toMatchObject({
        state: 'replaced',
        destinations: [{ destination: '', state: 'replaced' }],
      });
      expect((await fx.outbox.trace(result.messageId)).message).toMatchObject({ key: 'cust-1', state: 'sent' });

      // Neither requeued nor edited a second time.
      expect(await deadLetters().requeue([original])).toBe(0);
      const again = await deadLetters()
        .editAndRequeue(original, { payload: { vat: 'FR-9' } })
        .catch((e: unknown) => e);
      expect(again).toBeInstanceOf(OutboxNotDeadError);
      expect(again).toMatchObject({ code: 'OUTBOX_NOT_DEAD', status: 'replaced', replacedBy: result.messageId });
    });

    it(`copies only the dead row of a message with several destinations; the sent one stays as it was (${DATABASE_LABEL[kind]})`, async () => {
      const handler = fx.app.get(InvoiceHandler);
      const id = `multi-${kind}`;
      const handlerRow = 'handler:InvoiceHandler.handle';
      await repo().insert([
        {
          ...row(id, 'multi-1', 'dead', { n: 1 }),
          destination: 'broker:BROKER',
          status: 'sent',
          sentAt: new Date(3_000_000),
        },
        { ...row(id, 'multi-1', 'dead', { n: 1 }), destination: handlerRow },
      ] as never);
      const result = await deadLetters().editAndRequeue(id, { payload: { n: 2 } });
      expect(result.audit.destinations).toEqual([handlerRow]);
      await eventually(() => handler.seen.some((s) => s.messageId === result.messageId));
      const original = await repo().find({ where: { messageId: id }, order: { seq: 'ASC' } });
      expect(original.map((r) => [r.destination, r.status])).toEqual([
        ['broker:BROKER', 'sent'],
        [handlerRow, 'replaced'],
      ]);
      const copies = await repo().findBy({ messageId: result.messageId });
      expect(copies.map((r) => r.destination)).toEqual([handlerRow]);
      // get() of the original shows its replaced row and the audit (not the sent one).
      expect(await deadLetters().get(id)).toMatchObject({ status: 'replaced', replacedBy: result.messageId });
    });

    it(`keeps the headers the library wrote (an inbox row's scope and fingerprint) and takes back the headers get() read (${DATABASE_LABEL[kind]})`, async () => {
      const id = `inbox-${kind}`;
      const stored = { tenant: 't1', 'x-outbox-inbox-scope': 'orders', 'x-outbox-inbox-fingerprint': 'f-1' };
      await repo().insert([row(id, 'inbox-1', 'dead', { a: 1 }, stored)] as never);
      const read = JSON.parse((await deadLetters().get(id))!.headers!) as Record<string, string>;
      const result = await deadLetters().editAndRequeue(id, { headers: { ...read, tenant: 't2' } });
      const copy = await repo().findOneByOrFail({ messageId: result.messageId });
      expect(JSON.parse(copy.headers!)).toEqual({ ...stored, tenant: 't2', 'x-outbox-replaces': id });
      expect(result.audit.changes).toEqual([{ field: 'headers', path: '/tenant', before: '"t1"', after: '"t2"' }]);
      const changed = await deadLetters()
        .editAndRequeue(`bad-scope-${kind}`, { headers: { 'x-outbox-inbox-scope': 'other' } })
        .catch((e: unknown) => e);
      expect(changed).toBeInstanceOf(OutboxMessageNotFoundError);
      await repo().insert([row(`bad-scope-${kind}`, 'inbox-2', 'dead', { a: 1 }, stored)] as never);
      const refused = await deadLetters()
        .editAndRequeue(`bad-scope-${kind}`, { headers: { ...stored, 'x-outbox-inbox-scope': 'other' } })
        .catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(OutboxEditInvalidError);
      expect((refused as Error).message).toContain('"x-outbox-inbox-scope" is written by the library');
    });

    it(`makes exactly one copy of concurrent edits of one message (${DATABASE_LABEL[kind]})`, async () => {
      const ids = Array.from({ length: 6 }, (_, i) => `race-${kind}-${i}`);
      await repo().insert(ids.map((id, i) => row(id, `race-${i}`, 'dead', { n: i })) as never);
      const outcomes = await Promise.all(
        ids.map((id) =>
          Promise.allSettled(
            Array.from({ length: 5 }, (_, j) =>
              deadLetters().editAndRequeue(id, { payload: { n: 100 + j }, actor: `op-${j}` }),
            ),
          ),
        ),
      );
      for (const [i, settled] of outcomes.entries()) {
        const won = settled.filter((s) => s.status === 'fulfilled');
        const lost = settled.filter((s): s is PromiseRejectedResult => s.status === 'rejected');
        expect(won).toHaveLength(1);
        for (const l of lost) expect(l.reason).toBeInstanceOf(OutboxNotDeadError);
        const copyId = (won[0] as PromiseFulfilledResult<{ messageId: string }>).value.messageId;
        const originals = await repo().findBy({ messageId: ids[i] });
        expect(originals.map((o) => o.status)).toEqual(['replaced']);
        const copies = (await repo().findBy({ key: `race-${i}` })).filter((r) => r.messageId !== ids[i]);
        expect(copies.map((c) => c.messageId)).toEqual([copyId]);
        expect(JSON.parse(copies[0].headers!)).toEqual({ 'x-outbox-replaces': ids[i] });
        const audit = (await deadLetters().get(ids[i]))!.edit!;
        expect(audit.replacedBy).toBe(copyId);
      }
    });

    it(`writes the copy and the kept original in one transaction: a failure in between leaves the dead letter as it was (${DATABASE_LABEL[kind]})`, async () => {
      const id = `atomic-${kind}`;
      await repo().insert([row(id, 'atomic-1', 'dead', { a: 1 })] as never);
      const dead = await repo().findOneByOrFail({ messageId: id });
      const database = fx.app.get(OutboxDatabase);
      const failing = runInTransaction(fx.dataSource, (m) =>
        database.dialect.replaceDead(m, database.table, {
          messageId: id,
          seqs: [dead.seq],
          newMessageId: `atomic-copy-${kind}`,
          payload: '{"a":2}',
          headers: null,
          audit: () => {
            throw new Error('the audit could not be written'); // after the copy's UPDATE, before the original's INSERT
          },
        }),
      );
      await expect(failing).rejects.toThrow('the audit could not be written');
      expect(await repo().findBy({ key: 'atomic-1' })).toMatchObject([
        { messageId: id, status: 'dead', payload: '{"a":1}', attempts: 5, editAudit: null },
      ]);
      // And the real call then succeeds once.
      await deadLetters().editAndRequeue(id, { payload: { a: 2 } });
      expect((await repo().findBy({ key: 'atomic-1' })).map((r) => r.status).sort()).toEqual(['pending', 'replaced']);
    });

    it(`refuses with named errors: unknown id, not dead, bad edits, inside a transaction (${DATABASE_LABEL[kind]})`, async () => {
      await repo().insert([
        row(`bad-${kind}-dead`, 'bad-1', 'dead', { a: 1 }),
        row(`bad-${kind}-pending`, 'bad-2', 'pending', { a: 1 }),
      ] as never);
      const edit = (id: string, e: object) =>
        deadLetters()
          .editAndRequeue(id, e as never)
          .catch((error: unknown) => error);
      const dead = `bad-${kind}-dead`;
      expect(await edit('no-such-id', { payload: {} })).toBeInstanceOf(OutboxMessageNotFoundError);
      expect(await edit(dead, { payload: { a: 2 }, destination: 'handler:Nope.nope' })).toBeInstanceOf(
        OutboxMessageNotFoundError,
      );
      expect(await edit(`bad-${kind}-pending`, { payload: { a: 2 } })).toMatchObject({
        code: 'OUTBOX_NOT_DEAD',
        status: 'pending',
      });
      const invalid: Array<[object, RegExp]> = [
        [{ payload: { a: 1n } }, /bigint/],
        [{ headers: { 'x-message-id': 'x' } }, /written by the library/],
        [{ headers: { 'X-Outbox-Replaces': 'x' } }, /written by the library/],
        [{ headers: { n: 1 } }, /must be a string/],
        [{ pattern: 'Other', payload: { a: 2 } }, /"pattern" cannot be edited/],
        [{ reason: 'why' }, /give a corrected payload or headers/],
        [{ payload: { a: 1 } }, /nothing to change/],
        [{ payload: { a: 2 }, actor: 'x'.repeat(256) }, /actor must be/],
      ];
      for (const [e, message] of invalid) {
        const error = await edit(dead, e);
        expect(error).toBeInstanceOf(OutboxEditInvalidError);
        expect((error as Error).message).toMatch(message);
      }
      const inside = await fx.outbox
        .transaction(() => deadLetters().editAndRequeue(dead, { payload: { a: 2 } }))
        .catch((error: unknown) => error);
      expect(inside).toBeInstanceOf(OutboxInTransactionError);
      // Nothing of it changed the dead letter.
      expect(await repo().findBy({ messageId: dead })).toMatchObject([{ status: 'dead', payload: '{"a":1}' }]);
      expect(await repo().count({ where: { key: 'bad-1' } })).toBe(1);
    });

    it(`is off unless deadLetters.allowEdit is set: a named error that names the option (${DATABASE_LABEL[kind]})`, async () => {
      const off = await fx.start({ logger: false, outbox: { client: undefined, publisher: { enabled: false } } });
      await repo().insert([row(`off-${kind}`, 'off-1', 'dead', { a: 1 })] as never);
      const error = await off
        .get(OutboxDeadLetters)
        .editAndRequeue(`off-${kind}`, { payload: { a: 2 } })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OutboxEditDisabledError);
      expect((error as Error).message).toContain('deadLetters: { allowEdit: true }');
      expect(off.get(OutboxDeadLetters).editAllowed).toBe(false);
      expect(deadLetters().editAllowed).toBe(true);
      expect(await repo().findBy({ messageId: `off-${kind}` })).toMatchObject([{ status: 'dead' }]);
      await off.close();
    });
  });
}
