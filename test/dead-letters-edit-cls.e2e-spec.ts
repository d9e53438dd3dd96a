import { TransactionHost } from '@nestjs-cls/transactional';
import { DataSource } from 'typeorm';
import { OutboxDeadLetters, OutboxMessage } from '../src';
import { OutboxInTransactionError } from '../src/errors';
import { clsTransactionalModule } from './fixtures/cls-transactional';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

/** A dead letter as the relay leaves it. */
const row = (messageId: string, key: string, payload: object) => ({
  messageId,
  pattern: 'Invoice',
  key,
  payload: JSON.stringify(payload),
  status: 'dead',
  attempts: 5,
  availableAt: new Date(1_000_000),
  createdAt: new Date(1_000_000),
  deadAt: new Date(2_000_000),
  lastError: 'VatRejectedError: VAT id rejected',
});

for (const kind of ['postgres', 'mariadb'] as DatabaseKind[]) {
  describeWith(servicesOf(kind), `Edit-and-requeue with transactions: 'cls' on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useOutboxApp(kind, {
      logger: false,
      imports: [clsTransactionalModule(false)],
      outbox: {
        client: undefined,
        transactions: 'cls',
        publisher: { enabled: false },
        deadLetters: { allowEdit: true },
      },
    });

    it('copies and marks through the plugged-in source, and refuses inside a cls transaction', async () => {
      const repo = fx.app.get(DataSource).getRepository(OutboxMessage);
      await repo.insert([row(`cls-${kind}`, 'cls-1', { a: 1 })] as never);
      const deadLetters = fx.app.get(OutboxDeadLetters);
      const txHost = fx.app.get(TransactionHost);
      await expect(
        txHost.withTransaction(() => deadLetters.editAndRequeue(`cls-${kind}`, { payload: { a: 2 } })),
      ).rejects.toThrow(OutboxInTransactionError);
      const { messageId } = await deadLetters.editAndRequeue(`cls-${kind}`, { payload: { a: 2 }, actor: 'ops' });
      const rows = await repo.find({ where: { key: 'cls-1' }, order: { messageId: 'ASC' } });
      expect(rows.map((r) => [r.messageId, r.status]).sort()).toEqual(
        [
          [`cls-${kind}`, 'replaced'],
          [messageId, 'pending'],
        ].sort(),
      );
    });
  });
}
