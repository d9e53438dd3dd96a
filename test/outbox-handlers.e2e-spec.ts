import { Injectable } from '@nestjs/common';
import {
  OnOutboxEvent,
  OutboxConfigurationError,
  OutboxDeadLetters,
  OutboxEventContext,
  OutboxPublisher,
  OutboxService,
} from '../src';
import { OutboxDatabase } from '../src/dialects/outbox-database';
import { useOutboxApp, useTestDatabase } from './helpers/e2e-fixture';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { TestOrder } from './fixtures/order.entity';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/**
 * Durable in-process handlers: `@OnOutboxEvent()` methods run from the outbox table after the commit, each in its
 * own transaction with its (handler, message id) record — on an outbox with no broker at all.
 */
@Injectable()
class Handlers {
  /** Calls seen by each handler (effects are rows in test_orders, written in the handler's transaction). */
  readonly calls: Array<{ handler: string; id: string; attempts: number }> = [];
  readonly failuresLeft = new Map<string, number>();

  constructor(private readonly outbox: OutboxService) {}

  private async apply(
    handler: string,
    payload: { ref: string; fail?: number; poison?: boolean },
    c: OutboxEventContext,
  ) {
    this.calls.push({ handler, id: c.messageId, attempts: c.attempts });
    // The effect is written first, so a failure after it proves the rollback.
    await this.outbox.manager.insert(TestOrder, { reference: `${handler}:${payload.ref}`, amount: c.attempts });
    if (payload.poison) throw new Error(`poison ${payload.ref}`);
    const left = this.failuresLeft.get(`${handler}:${payload.ref}`) ?? payload.fail ?? 0;
    if (left > 0) {
      this.failuresLeft.set(`${handler}:${payload.ref}`, left - 1);
      throw new Error(`flaky ${payload.ref}`);
    }
  }

  @OnOutboxEvent('Applied')
  applied(payload: { ref: string; fail?: number; poison?: boolean }, context: OutboxEventContext) {
    return this.apply('applied', payload, context);
  }

  @OnOutboxEvent('Fanned')
  first(payload: { ref: string }, context: OutboxEventContext) {
    return this.apply('first', { ref: payload.ref }, context); // only the second handler fails
  }

  @OnOutboxEvent('Fanned', { name: 'second-of-fanned' })
  second(payload: { ref: string; fail?: number }, context: OutboxEventContext) {
    return this.apply('second', payload, context);
  }
}

const kinds: DatabaseKind[] = ['postgres', 'mariadb', 'sqlite'];

for (const kind of kinds) {
  describeWith(
    servicesOf(kind),
    `In-process @OnOutboxEvent() handlers without a broker on ${DATABASE_LABEL[kind]}`,
    () => {
      const fixture = useOutboxApp(kind, {
        logger: false,
        providers: [Handlers],
        outbox: {
          client: undefined,
          publisher: { pollingInterval: 50 },
          retry: { maxAttempts: 3, initialDelay: 20, maxDelay: 60, jitter: 0 },
        },
      });
      const handlers = () => fixture.app.get(Handlers);
      const effects = async (prefix: string) =>
        (await fixture.dataSource.getRepository(TestOrder).find({ order: { id: 'ASC' } }))
          .map((o) => o.reference)
          .filter((r) => r.startsWith(prefix));
      /** A message's status over its rows (one per destination): sent once all are, dead once one is. */
      const statusOf = async (id: string) => {
        const rows: Array<{ status: string }> = await fixture.dataSource.query(
          `SELECT status FROM outbox_messages WHERE message_id = '${id}'`,
        );
        if (rows.length === 0) return undefined;
        if (rows.every((r) => r.status === 'sent')) return 'sent';
        return rows.some((r) => r.status === 'dead') ? 'dead' : 'pending';
      };
      const emit = (pattern: string, payload: object, key?: string) =>
        fixture.outbox.transaction(() => fixture.outbox.emit(pattern, payload, key ? { key } : {}));

      it('applies a handler that fails twice then succeeds exactly once, and marks the message sent', async () => {
        const id = await emit('Applied', { ref: 'flaky', fail: 2 });
        await waitFor(async () => (await statusOf(id)) === 'sent', 'the flaky message to be sent');
        expect(
          handlers()
            .calls.filter((c) => c.id === id)
            .map((c) => c.attempts),
        ).toEqual([1, 2, 3]);
        expect(await effects('applied:flaky')).toEqual(['applied:flaky']);
        const records = await fixture.dataSource.query(
          `SELECT scope FROM idempotency_keys WHERE idempotency_key = '${id}'`,
        );
        expect(records).toEqual([{ scope: 'outbox-handler:Handlers.applied' }]);
      });

      it('runs several handlers of one pattern once each, one row each: a failing one is retried alone', async () => {
        const id = await emit('Fanned', { ref: 'fan', fail: 1 });
        const rows = await fixture.dataSource.query(
          `SELECT destination FROM outbox_messages WHERE message_id = '${id}' ORDER BY seq`,
        );
        expect(rows.map((r: { destination: string }) => r.destination)).toEqual([
          'handler:Handlers.first',
          'handler:second-of-fanned',
        ]);
        await waitFor(async () => (await statusOf(id)) === 'sent', 'the fanned message to be sent');
        const calls = handlers().calls.filter((c) => c.id === id);
        expect(calls.filter((c) => c.handler === 'first').map((c) => c.attempts)).toEqual([1]);
        expect(calls.filter((c) => c.handler === 'second').map((c) => c.attempts)).toEqual([1, 2]);
        expect((await effects('first:fan')).length + (await effects('second:fan')).length).toBe(2);
      });

      it('a handler that keeps failing goes dead on its own row; requeue by message id requeues that row', async () => {
        const id = await emit('Fanned', { ref: 'fan-dead', fail: 3 });
        await waitFor(async () => (await statusOf(id)) === 'dead', 'the failing handler to go dead');
        const deadLetters = fixture.app.get(OutboxDeadLetters);
        const page = await deadLetters.page({ destination: 'handler:second-of-fanned' });
        expect(page.items.filter((i) => i.messageId === id)).toEqual([
          expect.objectContaining({ destination: 'handler:second-of-fanned', attempts: 3 }),
        ]);
        expect((await deadLetters.page({ destination: 'handler:Handlers.first' })).items).toEqual([]);
        const detail = await deadLetters.get(id);
        expect(detail).toMatchObject({
          destination: 'handler:second-of-fanned',
          status: 'dead',
          destinations: [
            { destination: 'handler:Handlers.first', status: 'sent', attempts: 1 },
            { destination: 'handler:second-of-fanned', status: 'dead', attempts: 3 },
          ],
        });
        expect((await deadLetters.get(id, 'handler:Handlers.first'))?.status).toBe('sent');
        expect(await deadLetters.requeue([id])).toBe(1);
        await waitFor(async () => (await statusOf(id)) === 'sent', 'the requeued row to be sent');
        const calls = handlers().calls.filter((c) => c.id === id);
        expect(calls.filter((c) => c.handler === 'first')).toHaveLength(1);
        expect(calls.filter((c) => c.handler === 'second').map((c) => c.attempts)).toEqual([1, 2, 3, 1]);
      });

      it('a row whose handler is gone goes dead with OutboxNoDestinationError naming the fix', async () => {
        const { dialect, table } = fixture.app.get(OutboxDatabase);
        const id = `gone-${Date.now()}`;
        const row = { messageId: id, pattern: 'Fanned', payload: '{"ref":"gone"}', headers: null, key: null };
        await dialect.insert(fixture.dataSource.manager, table, [{ ...row, destination: 'handler:RemovedHandler' }]);
        await waitFor(async () => (await statusOf(id)) === 'dead', 'the row to go dead');
        const detail = await fixture.app.get(OutboxDeadLetters).get(id);
        expect(detail?.lastError).toMatch(
          /OutboxNoDestinationError: .*destination 'handler:RemovedHandler', but no @OnOutboxEvent\('Fanned'\) handler is named 'RemovedHandler'.*Add it back/,
        );
        expect(detail?.attempts).toBe(3);
      });

      it("keeps a key's order, and a poison message goes dead without holding back other keys", async () => {
        const poison = await emit('Applied', { ref: 'poison', poison: true }, 'key-poison');
        const after = await emit('Applied', { ref: 'after-poison' }, 'key-poison');
        const ordered: string[] = [];
        for (let i = 0; i < 5; i++)
          ordered.push(await emit('Applied', { ref: `o${i}`, fail: i === 1 ? 1 : 0 }, 'key-o'));
        await waitFor(async () => (await statusOf(ordered[4])) === 'sent', 'the ordered key to drain');
        const firstRuns = handlers()
          .calls.filter((c) => ordered.includes(c.id))
          .map((c) => ordered.indexOf(c.id));
        expect(firstRuns).toEqual([0, 1, 1, 2, 3, 4]);
        expect(await effects('applied:o')).toEqual([
          'applied:o0',
          'applied:o1',
          'applied:o2',
          'applied:o3',
          'applied:o4',
        ]);
        // Should this time out (it did, rarely, on MariaDB under TypeORM 0.3), the row's attempts and last error say
        // whether each retry found the record held ("in flight") or the relay did not come back to it.
        const rowOf = async () =>
          JSON.stringify(
            await fixture.dataSource.query(
              `SELECT status, attempts, available_at, claimed_by, last_error FROM outbox_messages WHERE message_id = '${poison}'`,
            ),
          );
        await waitFor(async () => (await statusOf(poison)) === 'dead', 'the poison message to go dead', 20_000, rowOf);
        expect(await statusOf(after)).toBe('pending');
        expect(await effects('applied:poison')).toEqual([]);
        const detail = await fixture.app.get(OutboxDeadLetters).get(poison);
        expect(detail?.lastError).toMatch(
          /OutboxHandlerFailedError: In-process handler Handlers.applied failed: poison/,
        );
      });

      it('dead-letters a message of a pattern nobody handles, naming the fix', async () => {
        const id = await emit('Unhandled', { ref: 'x' });
        await waitFor(async () => (await statusOf(id)) === 'dead', 'the unhandled message to go dead');
        const detail = await fixture.app.get(OutboxDeadLetters).get(id);
        expect(detail?.lastError).toMatch(/OutboxNoDestinationError: .*no @OnOutboxEvent\('Unhandled'\) handler/);
        expect(fixture.app.get(OutboxPublisher).transportName).toBeUndefined();
      });
    },
  );
}

/** Runs of the slow handler in this process, per message id, across both replicas (apps) of the next suite. */
const slowRuns = new Map<string, number>();

@Injectable()
class SlowHandler {
  constructor(private readonly outbox: OutboxService) {}

  /** The first run of a message outlives the claim's lease, so another pass takes the message over meanwhile. */
  @OnOutboxEvent('Slow')
  async handle(payload: { ref: string }, context: OutboxEventContext) {
    const runs = (slowRuns.get(context.messageId) ?? 0) + 1;
    slowRuns.set(context.messageId, runs);
    await this.outbox.manager.insert(TestOrder, { reference: `slow:${payload.ref}`, amount: runs });
    if (runs === 1) await new Promise((resolve) => setTimeout(resolve, 3000));
  }
}

for (const kind of ['postgres', 'mariadb'] as DatabaseKind[]) {
  describeWith(
    servicesOf(kind),
    `An in-process handler outliving its lease, two replicas, ${DATABASE_LABEL[kind]}`,
    () => {
      const options = {
        logger: false as const,
        providers: [SlowHandler],
        outbox: {
          client: undefined,
          publisher: { pollingInterval: 50, publishTimeout: 100, leaseDuration: 1100 },
          retry: { initialDelay: 50, maxDelay: 200, jitter: 0 },
        },
      };
      const fixture = useOutboxApp(kind, options);

      it('is applied once: the run that takes the message over meanwhile finds the record held and retries later', async () => {
        await fixture.start(options); // a second replica on the same database
        const ids = await fixture.outbox.transaction(async () => [
          await fixture.outbox.emit('Slow', { ref: 'a' }),
          await fixture.outbox.emit('Slow', { ref: 'b' }),
        ]);
        const statusOf = async (id: string) =>
          (await fixture.dataSource.query(`SELECT status FROM outbox_messages WHERE message_id = '${id}'`))[0]?.status;
        await waitFor(
          async () => (await statusOf(ids[0])) === 'sent' && (await statusOf(ids[1])) === 'sent',
          'both sent',
        );
        const attempts = (
          await fixture.dataSource.query(
            `SELECT attempts FROM outbox_messages WHERE message_id IN ('${ids[0]}', '${ids[1]}')`,
          )
        ).map((r: { attempts: number }) => Number(r.attempts));
        // Taken over at least once while the first run slept (lease 1.1 s, handler 3 s)...
        expect(Math.min(...attempts)).toBeGreaterThanOrEqual(2);
        // ...and yet each handler body ran once and its effect exists once.
        expect(ids.map((id) => slowRuns.get(id))).toEqual([1, 1]);
        const rows = await fixture.dataSource.getRepository(TestOrder).find();
        expect(rows.map((r) => r.reference).sort()).toEqual(['slow:a', 'slow:b']);
      });
    },
  );
}

/** Runs of the stuck handler, and the way to let its first run return (it never would on its own). */
const stuck = { runs: 0, release: (): void => undefined };

@Injectable()
class StuckHandler {
  constructor(private readonly outbox: OutboxService) {}

  /** The first run writes its effect, then hangs (an awaited call without a timeout) until the test lets it go. */
  @OnOutboxEvent('Stuck')
  async handle(payload: { ref: string }) {
    stuck.runs++;
    await this.outbox.manager.insert(TestOrder, { reference: `stuck:${payload.ref}`, amount: stuck.runs });
    await new Promise<void>((resolve) => (stuck.release = resolve));
  }
}

for (const kind of ['postgres', 'mariadb'] as DatabaseKind[]) {
  describeWith(servicesOf(kind), `An in-process handler that never returns, ${DATABASE_LABEL[kind]}`, () => {
    const fixture = useOutboxApp(kind, {
      logger: false,
      providers: [StuckHandler],
      outbox: {
        client: undefined,
        publisher: { pollingInterval: 50, publishTimeout: 100, leaseDuration: 1100 },
        retry: { maxAttempts: 3, initialDelay: 50, maxDelay: 200, jitter: 0 },
      },
    });

    it('is not retried forever: past 2 leases of being held, the attempts count and the message goes dead', async () => {
      stuck.runs = 0;
      const id = await fixture.outbox.transaction(() => fixture.outbox.emit('Stuck', { ref: 'a' }));
      const rowOf = async () =>
        (
          await fixture.dataSource.query(
            `SELECT status, attempts, last_error FROM outbox_messages WHERE message_id = '${id}'`,
          )
        )[0] as { status: string; attempts: number; last_error: string | null };
      try {
        // Retries find the record held (given back), then, past the grace, count until retry.maxAttempts.
        await waitFor(async () => (await rowOf()).status === 'dead', 'the stuck message to go dead');
      } finally {
        stuck.release();
      }
      const dead = await rowOf();
      expect(Number(dead.attempts)).toBe(3);
      expect(dead.last_error).toMatch(
        /OutboxHandlerFailedError: In-process handler StuckHandler.handle is running message .* Still held \d+ s after this publisher first found it \(2 × publisher\.leaseDuration\), so the attempt counts toward retry\.maxAttempts/,
      );
      // The hanging run was the only one to run the handler: every retry found its record held.
      expect(stuck.runs).toBe(1);
    });
  });
}

@Injectable()
class RenamedTwice {
  @OnOutboxEvent('Clash', { name: 'clash' })
  one() {}

  @OnOutboxEvent('Clash', { name: 'clash' })
  two() {}
}

describe(`Startup checks of in-process handlers on ${DATABASE_LABEL.sqlite}`, () => {
  const fixture = useTestDatabase('sqlite');

  it('an outbox with no client, no route and no handler fails startup, naming the fix', async () => {
    const started = fixture.start({ logger: false, outbox: { client: undefined } });
    await expect(started).rejects.toThrow(OutboxConfigurationError);
    await expect(started).rejects.toThrow(/nowhere to deliver messages.*add an @OnOutboxEvent\(\) handler/);
  });

  it('two handlers of one pattern with one name fail startup, naming the fix', async () => {
    const started = fixture.start({ logger: false, providers: [RenamedTwice], outbox: { client: undefined } });
    await expect(started).rejects.toThrow(/Two @OnOutboxEvent\('Clash'\) handlers are named 'clash'.*Give one a name/);
  });
});
