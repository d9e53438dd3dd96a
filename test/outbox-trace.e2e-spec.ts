import request from 'supertest';
import type { OutboxTrace } from '../src';
import { OutboxTraceQueryError } from '../src/errors';
import { Payments, PaymentsController } from './fixtures/trace-app';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/**
 * `OutboxService.trace()`: a request of key K emits two events, an in-process handler applies each and emits one
 * more for the second, whose own handler always fails (dead after its attempts). The trace of K shows the request,
 * the three messages with their states and the handler's records; the trace of a message id shows its subtree.
 */

const kinds: DatabaseKind[] = ['postgres', 'mariadb', 'sqlite'];

for (const kind of kinds) {
  describeWith(servicesOf(kind), `OutboxService.trace() on ${DATABASE_LABEL[kind]}`, () => {
    const fixture = useOutboxApp(kind, {
      logger: false,
      controllers: [PaymentsController],
      providers: [Payments],
      outbox: {
        client: undefined,
        publisher: { pollingInterval: 30 },
        retry: { maxAttempts: 2, initialDelay: 10, maxDelay: 20, jitter: 0 },
      },
    });
    const key = `K-${kind}-${Date.now().toString(36)}`;
    let trace: OutboxTrace;

    beforeAll(async () => {
      const res = await request(fixture.app.getHttpServer())
        .post('/payments')
        .set('Idempotency-Key', key)
        .set('x-user', 'alice')
        .send({ ref: 'r1' });
      expect(res.status).toBe(201);
      // Both PaymentTaken rows sent, and the ReceiptSent row dead.
      const settled = async () => {
        const t = await fixture.outbox.trace(key, { scope: 'alice' });
        const messages = t.request?.emitted ?? [];
        const receipt = messages[1]?.consumers[0]?.emitted[0];
        return messages.every((m) => m.state === 'sent') && receipt?.state === 'dead' ? t : undefined;
      };
      await waitFor(async () => (await settled()) !== undefined, 'the payment messages to settle');
      trace = (await settled())!;
    });

    it("trace(K, { scope }) shows the request, its two messages, the handler's records and the third message", () => {
      expect(trace).toMatchObject({ id: key, scope: 'alice', message: null, depth: 4, truncated: false });
      const req = trace.request!;
      expect(req).toMatchObject({ kind: 'request', scope: 'alice', key, state: 'completed', responseStatus: 201 });
      expect(req.steps.map((s) => s.name)).toEqual(['charge']);
      expect(Date.parse(req.createdAt!)).toBeLessThanOrEqual(Date.parse(req.expiresAt!));
      expect(req).not.toHaveProperty('response');
      expect(JSON.stringify(trace)).not.toContain('stored-response-secret');

      expect(req.emitted.map((m) => [m.pattern, m.state])).toEqual([
        ['PaymentTaken', 'sent'],
        ['PaymentTaken', 'sent'],
      ]);
      for (const m of req.emitted) {
        expect(m.cause).toEqual({ scope: 'alice', key });
        expect(m.destinations).toEqual([
          expect.objectContaining({
            destination: '', // one row for every destination (one handler)
            state: 'sent',
            attempts: 1,
            failures: [],
          }),
        ]);
        expect(m.consumers).toEqual([
          expect.objectContaining({
            kind: 'handler',
            scope: 'outbox-handler:Payments.onTaken',
            key: m.messageId,
            state: 'completed',
            responseStatus: null,
          }),
        ]);
      }
      expect(req.emitted[0].consumers[0].emitted).toEqual([]);
      const [receipt] = req.emitted[1].consumers[0].emitted;
      expect(receipt).toMatchObject({
        pattern: 'ReceiptSent',
        state: 'dead',
        cause: { scope: 'outbox-handler:Payments.onTaken', key: req.emitted[1].messageId },
        consumers: [],
      });
      expect(receipt.destinations).toHaveLength(1);
      const [row] = receipt.destinations;
      expect(row).toMatchObject({ destination: '', state: 'dead', attempts: 2 });
      expect(row.deadAt).not.toBeNull();
      expect(row.failures.map((f) => f.attempt)).toEqual([1, 2]);
      expect(row.failures[0].error).toContain('mail server said no <script>');
      // 3 messages in all.
      const all = [...req.emitted, receipt];
      expect(new Set(all.map((m) => m.messageId)).size).toBe(3);
    });

    it('trace(<message id>) shows the same subtree', async () => {
      const second = trace.request!.emitted[1];
      const byId = await fixture.outbox.trace(second.messageId);
      expect(byId.request).toBeNull();
      expect(byId.message).toEqual(second);
      const receipt = second.consumers[0].emitted[0];
      expect((await fixture.outbox.trace(receipt.messageId)).message).toEqual(receipt);
    });

    it("does not find a key of another principal's scope without that scope", async () => {
      for (const t of [await fixture.outbox.trace(key), await fixture.outbox.trace(key, { scope: 'bob' })]) {
        expect(t.request).toBeNull();
        expect(t.message).toBeNull();
      }
    });

    it('carries the cause in the x-outbox-cause header: the request key, then the message id', () => {
      const [first, second] = trace.request!.emitted;
      const receipt = second.consumers[0].emitted[0];
      const { headers } = fixture.app.get(Payments);
      expect(headers.filter((h) => h['x-outbox-cause'] === key)).toHaveLength(2);
      expect(headers.filter((h) => h['x-outbox-cause'] === second.messageId).length).toBeGreaterThanOrEqual(2);
      expect(headers.some((h) => h['x-outbox-cause'] === first.messageId)).toBe(false);
      expect(receipt.cause?.key).toBe(second.messageId);
    });

    it('limits the depth, says it was truncated, and gives stored responses only when asked', async () => {
      const shallow = await fixture.outbox.trace(key, { scope: 'alice', depth: 1 });
      expect(shallow.truncated).toBe(true);
      expect(shallow.request!.emitted).toHaveLength(2);
      expect(shallow.request!.emitted[1].consumers[0].emitted).toEqual([]);
      const withResponse = await fixture.outbox.trace(key, { scope: 'alice', includeResponses: true });
      expect(withResponse.request!.response!.body).toContain('stored-response-secret');
    });

    it('refuses an invalid id or option with OutboxTraceQueryError', async () => {
      await expect(fixture.outbox.trace('')).rejects.toThrow(OutboxTraceQueryError);
      await expect(fixture.outbox.trace('x'.repeat(256))).rejects.toThrow(OutboxTraceQueryError);
      await expect(fixture.outbox.trace(key, { depth: 0 })).rejects.toThrow(/depth must be an integer from 1 to 20/);
    });
  });
}
