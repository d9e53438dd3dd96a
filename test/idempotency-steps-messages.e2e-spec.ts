import { Controller, INestApplication } from '@nestjs/common';
import { ClientProxy, MessagePattern, Payload } from '@nestjs/microservices';
import { lastValueFrom } from 'rxjs';
import { DataSource } from 'typeorm';
import { Idempotent, idempotentStep, OutboxService } from '../src';
import { IdempotencyStep } from '../src/schema/idempotency-step.entity';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { TestOrder } from './fixtures/order.entity';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { describeWith } from './helpers/services';
import { startWithTcpClient } from './helpers/tcp-app';

const seen = { providerCalls: [] as string[], failNext: 0 };

/** A message handler (request/response over TCP, keyed by a field of the message) with a step. */
@Controller()
class RefundHandler {
  constructor(private readonly outbox: OutboxService) {}

  @MessagePattern('refund')
  @Idempotent({ key: (data: { requestId: string }) => data.requestId })
  async refund(@Payload() data: { requestId: string; amount: number }) {
    const refund = await idempotentStep('refund', (stepKey) => {
      seen.providerCalls.push(stepKey);
      return { refundId: `re_${seen.providerCalls.length}`, amount: data.amount };
    });
    if (seen.failNext > 0) {
      seen.failNext--;
      throw new Error('the handler failed after its step');
    }
    await this.outbox.manager.save(TestOrder, { reference: data.requestId, amount: -data.amount });
    return refund;
  }
}

const kinds: DatabaseKind[] = ['sqlite', 'postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(servicesOf(kind), `idempotentStep() in a message handler (TCP) on ${DATABASE_LABEL[kind]}`, () => {
    let db: TestDatabase;
    let app: INestApplication;
    let client: ClientProxy;

    beforeAll(async () => {
      db = await createTestDatabase(kind);
      const moduleRef = await createOutboxTestingModule({
        db,
        controllers: [RefundHandler],
        outbox: { publisher: { enabled: false } },
      });
      ({ app, client } = await startWithTcpClient(moduleRef));
    });

    afterAll(async () => {
      await client?.close();
      await app?.close();
      await db?.drop();
    });

    it('a redelivery after a failed run resumes after the step; the reply is the recorded result', async () => {
      const requestId = `refund-${kind}-${Date.now().toString(36)}`;
      seen.failNext = 1;
      await expect(lastValueFrom(client.send('refund', { requestId, amount: 15 }))).rejects.toBeDefined();
      const ds = app.get(DataSource);
      expect(await ds.getRepository(IdempotencyStep).countBy({ key: requestId })).toBe(1);
      const callsBefore = seen.providerCalls.length;

      const reply = await lastValueFrom(client.send('refund', { requestId, amount: 15 }));
      expect(seen.providerCalls.length).toBe(callsBefore); // not called again
      expect(reply).toEqual({ refundId: `re_${callsBefore}`, amount: 15 });
      expect(await ds.getRepository(TestOrder).countBy({ reference: requestId })).toBe(1);
      expect(await lastValueFrom(client.send('refund', { requestId, amount: 15 }))).toEqual(reply);
    });
  });
}
