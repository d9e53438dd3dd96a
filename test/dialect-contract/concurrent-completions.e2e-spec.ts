import { randomUUID } from 'node:crypto';
import type { QueryRunner } from 'typeorm';
import { OutboxMessage } from '../../src';
import { OutboxAttempt } from '../../src/schema/outbox-attempt.entity';
import type { OutboxFailure } from '../../src/dialects/outbox-dialect';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from '../helpers/databases';
import { describeWith } from '../helpers/services';
import { DialectSubject, useDialectSubject } from './contract-subject';

/**
 * Two publishers write the failures of two different messages at the same time (two batches in flight, or two
 * replicas): neither completion may wait for the other. On MariaDB, trimming the attempt history with one
 * `DELETE … WHERE id IN (subquery)` scanned and locked the whole history table, so a second completion's INSERT
 * waited for the first — and two such completions deadlocked, which failed a publish pass and left its rows claimed
 * until their lease ran out (a poison message not dead within 20 s in CI).
 */

/** Makes a lock wait fail at once (about a second) instead of after the server's default of 50 s. */
async function failLockWaitsFast(kind: DatabaseKind, runner: QueryRunner): Promise<void> {
  if (kind === 'mariadb') await runner.query('SET SESSION innodb_lock_wait_timeout = 1');
  else await runner.query("SET LOCAL lock_timeout = '1s'");
}

for (const kind of ['postgres', 'mariadb'] as DatabaseKind[]) {
  describeWith(servicesOf(kind), `Concurrent completions with attempt history on ${DATABASE_LABEL[kind]}`, () => {
    const subject = useDialectSubject(kind);
    const history = { publisher: 'host-a:1', limit: 1 };

    const claim = (s: DialectSubject, owner: string, limit: number) =>
      s.dialect.claim(s.dataSource.manager, { table: s.table, owner, limit, leaseMs: 60_000 });
    const failureOf = (row: { seq: string; messageId: string }): OutboxFailure => ({
      seq: row.seq,
      error: `failed ${row.messageId}`,
      retryDelay: 0,
      dead: false,
    });

    it('two completions of different messages, each trimming its history, do not wait for each other', async () => {
      const s = subject();
      const suffix = randomUUID().slice(0, 8);
      const [a, b] = [`a-${suffix}`, `b-${suffix}`];
      await s.dialect.insert(
        s.dataSource.manager,
        s.table,
        [a, b].map((messageId) => ({ messageId, pattern: 'E', payload: '{}', headers: null, key: null })),
      );
      // One earlier failure each, so that the next one trims the history (limit 1).
      const earlier = randomUUID();
      const both = await claim(s, earlier, 10);
      expect(both.map((r) => r.messageId)).toEqual([a, b]);
      expect(await s.dialect.markFailed(s.dataSource.manager, s.table, earlier, both.map(failureOf), history)).toBe(2);
      // Then each is claimed by a publisher of its own.
      const first = { owner: randomUUID() };
      const second = { owner: randomUUID() };
      const [rowA] = await claim(s, first.owner, 1);
      const [rowB] = await claim(s, second.owner, 1);
      expect([rowA.messageId, rowB.messageId]).toEqual([a, b]);

      const runners = [s.dataSource.createQueryRunner(), s.dataSource.createQueryRunner()];
      try {
        for (const runner of runners) {
          await runner.startTransaction();
          await failLockWaitsFast(kind, runner);
        }
        // The first completion is written and its transaction kept open, as if its commit were still on the way.
        const [one, two] = runners;
        expect(await s.dialect.markFailed(one.manager, s.table, first.owner, [failureOf(rowA)], history)).toBe(1);
        // The second one, of another message, goes through meanwhile (it failed on a lock wait before).
        expect(await s.dialect.markFailed(two.manager, s.table, second.owner, [failureOf(rowB)], history)).toBe(1);
        await two.commitTransaction();
        await one.commitTransaction();
      } finally {
        for (const runner of runners) {
          if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
          await runner.release();
        }
      }

      for (const id of [a, b]) {
        const message = await s.dataSource.getRepository(OutboxMessage).findOneByOrFail({ messageId: id });
        const kept = await s.dataSource.getRepository(OutboxAttempt).find({ where: { messageSeq: message.seq } });
        expect(kept.map((k) => [k.attempt, k.error])).toEqual([[message.attempts, `failed ${id}`]]);
        expect(message.attempts).toBe(2);
      }
    });
  });
}
