import { Injectable } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import type { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { DataSource } from 'typeorm';
import { OnOutboxEvent, OutboxDeadLetters, OutboxMessage, OutboxService } from '../src';
import { OutboxInTransactionError } from '../src/errors';
import { clsTransactionalModule } from './fixtures/cls-transactional';
import { TestOrder } from './fixtures/order.entity';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

/** A handler writing through @nestjs-cls/transactional's TransactionHost, as a cls app's code does. */
@Injectable()
class ClsChargeHandler {
  constructor(
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    private readonly outbox: OutboxService,
  ) {}

  @OnOutboxEvent('Charge')
  async charge(payload: { ref: number }): Promise<void> {
    await this.txHost.tx.save(TestOrder, { reference: `cls-${payload.ref}`, amount: payload.ref });
    await this.outbox.emit('Charged', { ref: payload.ref });
    if (payload.ref === 0) throw new Error('still declined');
  }
}

for (const kind of ['postgres', 'sqlite'] as DatabaseKind[]) {
  describeWith(servicesOf(kind), `Dead-letter dry run with transactions: 'cls' on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useOutboxApp(kind, {
      logger: false,
      imports: [clsTransactionalModule(false)],
      providers: [ClsChargeHandler],
      outbox: { client: undefined, transactions: 'cls', publisher: { enabled: false } },
    });

    it('rolls back what the handler wrote through the TransactionHost, and refuses inside a cls transaction', async () => {
      const ds = fx.app.get(DataSource);
      await ds.getRepository(OutboxMessage).insert(
        [0, 1].map((ref) => ({
          messageId: `cls-${kind}-${ref}`,
          pattern: 'Charge',
          payload: JSON.stringify({ ref }),
          status: 'dead',
          attempts: 5,
          availableAt: new Date(1_000_000),
          createdAt: new Date(1_000_000),
          deadAt: new Date(2_000_000 + ref),
          lastError: 'Error: declined',
        })) as never,
      );
      const deadLetters = fx.app.get(OutboxDeadLetters);
      const trial = await deadLetters.dryRun();
      expect(trial.results.map((r) => [r.messageId, r.ok])).toEqual([
        [`cls-${kind}-1`, true],
        [`cls-${kind}-0`, false],
      ]);
      expect(trial.results[1].targets[0].error).toEqual({ errorClass: 'Error', message: 'still declined' });
      expect(await ds.getRepository(TestOrder).count()).toBe(0);
      expect(await ds.getRepository(OutboxMessage).count()).toBe(2);
      expect((await ds.getRepository(OutboxMessage).find()).every((r) => r.status === 'dead')).toBe(true);

      const txHost = fx.app.get(TransactionHost);
      await expect(txHost.withTransaction(() => deadLetters.dryRun())).rejects.toThrow(OutboxInTransactionError);
      await expect(txHost.withTransaction(() => deadLetters.dryRun())).rejects.toThrow(/outside any transaction/);
    });
  });
}
