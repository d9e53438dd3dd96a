import { OutboxMessage } from '../src';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

const kinds: DatabaseKind[] = ['postgres', 'mariadb'];

for (const kind of kinds) {
  describeWith(servicesOf(kind), `Same-key writers are numbered in commit order on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useOutboxApp(kind, { outbox: { publisher: { enabled: false } } });

    it('a second writer of the key waits for the first to commit, so its row comes after', async () => {
      const { outbox } = fx;
      const events: string[] = [];
      let firstEmitted!: () => void;
      const emitted = new Promise<void>((resolve) => (firstEmitted = resolve));
      let otherEmitted!: () => void;
      const otherDone = new Promise<void>((resolve) => (otherEmitted = resolve));
      const first = outbox.transaction(async () => {
        await outbox.emit('E', { n: 'first' }, { key: 'K', messageId: 'first' });
        firstEmitted();
        // Another key is not blocked by this transaction (bounded wait, so a wrong lock fails instead of hanging).
        await Promise.race([otherDone, new Promise((r) => setTimeout(r, 5000))]);
        await new Promise((r) => setTimeout(r, 300));
        events.push('first commits');
      });
      await emitted;
      const second = outbox.transaction(async () => {
        await outbox.emit('E', { n: 'second' }, { key: 'K', messageId: 'second' });
        events.push('second emitted');
      });
      const other = outbox.transaction(async () => {
        await outbox.emit('E', { n: 'other' }, { key: 'other-key', messageId: 'other' });
        events.push('other key emitted');
        otherEmitted();
      });
      await Promise.all([first, second, other]);
      expect(events).toEqual(['other key emitted', 'first commits', 'second emitted']);
      const rows = await fx.dataSource
        .getRepository(OutboxMessage)
        .find({ where: { key: 'K' }, order: { seq: 'ASC' } });
      expect(rows.map((r) => r.messageId)).toEqual(['first', 'second']);
    });
  });
}
