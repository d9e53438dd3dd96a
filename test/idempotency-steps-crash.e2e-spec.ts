import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { OUTBOX_MIGRATIONS } from '../src';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { IdempotencyStep } from '../src/schema/idempotency-step.entity';
import { TestOrder } from './fixtures/order.entity';
import type { StepsAppConfig } from './faults/apps/steps.main';
import { ChildApp } from './faults/support/child-app';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { describeWith } from './helpers/services';

/**
 * The app runs in a child process and is SIGKILLed in the middle of an idempotent request, after its steps
 * committed (or in the middle of a step); a retry on a fresh process resumes the key.
 */

/** A payment provider in the test process: deduplicates charges by the idempotency key it is given. */
class Provider {
  readonly calls: string[] = [];
  private readonly charges = new Map<string, { id: string; amount: number }>();
  /** What the gate (called after the steps) and the charge do: answer, or let the test kill the app there. */
  onGate: () => Promise<void> = async () => undefined;
  onCharge: (stepKey: string) => Promise<void> = async () => undefined;
  private server?: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }

  chargeOf(stepKey: string): { id: string; amount: number } | undefined {
    return this.charges.get(stepKey);
  }

  callsOf(stepKey: string): number {
    return this.calls.filter((k) => k === stepKey).length;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let text = '';
    for await (const chunk of req) text += chunk;
    const body = JSON.parse(text) as { stepKey: string; amount: number };
    if (req.url === '/gate') {
      await this.onGate();
    } else {
      this.calls.push(body.stepKey);
      let charge = this.charges.get(body.stepKey);
      if (!charge)
        this.charges.set(body.stepKey, (charge = { id: `ch_${this.charges.size + 1}`, amount: body.amount }));
      await this.onCharge(body.stepKey);
      if (res.destroyed) return;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(charge));
      return;
    }
    if (!res.destroyed) res.end('{}');
  }
}

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  for (const platform of ['express', 'fastify'] as const) {
    const title = `idempotentStep() after a SIGKILL of the app (${platform}) on ${DATABASE_LABEL[kind]}`;
    describeWith(servicesOf(kind), title, () => {
      let db: TestDatabase;
      let ds: DataSource;
      let app: ChildApp;
      const provider = new Provider();
      const appUrl = () => String(app.signals.filter((s) => s.type === 'ready').at(-1)!.url);
      const key = (name: string) => `${name}-${platform}-${Date.now().toString(36)}`;
      const post = (body: object, idempotencyKey: string) =>
        request(appUrl()).post('/shop/checkout').set('Idempotency-Key', idempotencyKey).send(body);
      const killThere = () => {
        let killed!: () => void;
        const done = new Promise<void>((resolve) => (killed = resolve));
        return {
          done,
          kill: async () => {
            provider.onGate = async () => undefined; // once: the retry goes through
            provider.onCharge = async () => undefined;
            await app.kill();
            killed();
          },
        };
      };

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        // The library's tables come from its shipped migrations (the child app checks the schema at startup).
        ds = new DataSource({
          ...db.options,
          entities: [TestOrder, IdempotencyRecord, IdempotencyStep],
          synchronize: false,
          migrations: [...OUTBOX_MIGRATIONS],
        } as any);
        await ds.initialize();
        await ds.runMigrations();
        await ds.query(
          kind === 'mariadb'
            ? 'CREATE TABLE `test_orders` (`id` int NOT NULL AUTO_INCREMENT PRIMARY KEY, `reference` varchar(100) NOT NULL, `amount` int NOT NULL)'
            : kind === 'postgres'
              ? 'CREATE TABLE "test_orders" ("id" SERIAL PRIMARY KEY, "reference" varchar(100) NOT NULL, "amount" int NOT NULL)'
              : 'CREATE TABLE "test_orders" ("id" integer PRIMARY KEY AUTOINCREMENT, "reference" varchar(100) NOT NULL, "amount" int NOT NULL)',
        );
        await provider.start();
        app = new ChildApp(
          'steps.main.ts',
          { db: db.options, platform, provider: provider.url } satisfies StepsAppConfig,
          `steps-${kind}-${platform}`,
        );
        await app.start();
      }, 180_000);

      afterAll(async () => {
        await app?.stop();
        await provider.stop();
        await ds?.destroy();
        await db?.drop();
      });

      afterEach(() => {
        provider.onGate = async () => undefined;
        provider.onCharge = async () => undefined;
      });

      it('a step that ran before the SIGKILL is not run again; the retry answers what a single run answers', async () => {
        const k = key('killed-after');
        const body = { reference: `R-${k}`, amount: 70 };
        const kill = killThere();
        provider.onGate = kill.kill; // the steps are committed when the handler reaches the gate
        const lost = post(body, k).then(
          (r) => r.status,
          () => 'connection lost',
        );
        await kill.done;
        expect(await lost).toBe('connection lost');
        expect((await ds.getRepository(IdempotencyStep).findBy({ key: k })).map((s) => s.step).sort()).toEqual([
          'charge',
          'fee',
        ]);
        expect(await ds.getRepository(TestOrder).countBy({ reference: body.reference })).toBe(0);
        expect(await ds.getRepository(IdempotencyRecord).countBy({ key: k })).toBe(0);
        const chargesBefore = provider.calls.length;

        await app.start(); // a new process; the dead one's lock went with its connection
        const resumed = await post(body, k);
        expect(resumed.status).toBe(201);
        expect(provider.calls.length).toBe(chargesBefore); // neither step called the provider again
        expect(await ds.getRepository(TestOrder).countBy({ reference: body.reference })).toBe(1);

        const single = await post({ ...body, reference: `S-${k}` }, `${k}-single`);
        expect(single.status).toBe(201);
        const [charge, fee] = provider.calls.slice(-2).map((stepKey) => provider.callsOf(stepKey));
        expect([charge, fee]).toEqual([1, 1]);
        expect(resumed.body).toEqual({
          reference: body.reference,
          charge: { id: expect.stringMatching(/^ch_\d+$/), amount: 70 },
          fee: { id: expect.stringMatching(/^ch_\d+$/), amount: 1 },
        });
        expect(resumed.body.charge.id).not.toBe(single.body.charge.id);
        expect(Object.keys(single.body)).toEqual(Object.keys(resumed.body));

        const replayed = await post(body, k);
        expect(replayed.headers['idempotent-replayed']).toBe('true');
        expect(replayed.body).toEqual(resumed.body);
      });

      it('a SIGKILL inside a step (called, not recorded): the retry calls again with the same step key, which the provider deduplicates', async () => {
        const k = key('killed-inside');
        const body = { reference: `I-${k}`, amount: 30 };
        const kill = killThere();
        provider.onCharge = kill.kill; // the provider charged; the app dies before it records the result
        const lost = post(body, k).then(
          (r) => r.status,
          () => 'connection lost',
        );
        await kill.done;
        expect(await lost).toBe('connection lost');
        const stepKey = provider.calls.at(-1)!;
        expect(await ds.getRepository(IdempotencyStep).countBy({ key: k })).toBe(0);

        await app.start();
        const resumed = await post(body, k);
        expect(resumed.status).toBe(201);
        expect(provider.callsOf(stepKey)).toBe(2); // called again: this is the limit steps cannot remove…
        expect(resumed.body.charge).toEqual(provider.chargeOf(stepKey)); // …but the provider charged once
        expect(await ds.getRepository(TestOrder).countBy({ reference: body.reference })).toBe(1);
      });
    });
  }
}
