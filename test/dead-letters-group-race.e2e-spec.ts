import { DataSource } from 'typeorm';
import { OutboxDeadLetters, OutboxMessage } from '../src';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

/**
 * A group requeue while new dead letters of the group arrive. `requeue({ group })` reads the group's rows when it
 * runs, so a message that died after the operator listed the groups is included; `{ group, deadBefore: lastSeen + 1 }`
 * (what the console sends) touches exactly the rows that were dead when the group was listed.
 */
for (const kind of ['postgres', 'mariadb', 'sqlite'] as DatabaseKind[]) {
  describeWith(servicesOf(kind), `Group requeue racing new dead letters on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useOutboxApp(kind, { logger: false, outbox: { publisher: { enabled: false } } });
    const dead = (messageId: string, deadAt: number) => ({
      messageId,
      pattern: 'OrderPlaced',
      payload: '{}',
      status: 'dead',
      attempts: 5,
      availableAt: new Date(1_000_000),
      createdAt: new Date(1_000_000),
      deadAt: new Date(deadAt),
      lastError: `OutboxPublishTimeoutError: order ${messageId.length * 7} failed after ${deadAt}ms`,
    });
    const repository = () => fx.app.get(DataSource).getRepository(OutboxMessage);
    const statusOf = async () =>
      Object.fromEntries((await repository().find()).map((r) => [r.messageId, r.status] as const));

    it(`touches only the rows seen with deadBefore: lastSeen + 1; without it, also the newcomers (${DATABASE_LABEL[kind]})`, async () => {
      const deadLetters = fx.app.get(OutboxDeadLetters);
      await repository().insert([
        dead('seen-1', 2_000_000),
        dead('seen-2', 2_000_500),
        dead('seen-3', 2_001_000),
      ] as never);
      const [group] = (await deadLetters.groups()).groups;
      expect({ count: group.count, lastSeen: group.lastSeen }).toEqual({ count: 3, lastSeen: 2_001_000 });
      const seen = { group: group.group, deadBefore: group.lastSeen! + 1 };

      // Two more messages of the same cause die after the operator looked (one also dies "in the past" of another
      // filter field, to show it is the death time that pins the selection).
      await repository().insert([dead('late-1', 2_001_001), dead('late-2', 2_005_000)] as never);
      expect(await deadLetters.count({ group: group.group })).toBe(5);
      expect(await deadLetters.count(seen)).toBe(3);
      const trial = await deadLetters.dryRun(seen);
      expect(trial.results.map((r) => r.messageId).sort()).toEqual(['seen-1', 'seen-2', 'seen-3']);

      expect(await deadLetters.requeue(seen)).toBe(3);
      expect(await statusOf()).toEqual({
        'seen-1': 'pending',
        'seen-2': 'pending',
        'seen-3': 'pending',
        'late-1': 'dead',
        'late-2': 'dead',
      });

      // Without the bound, the selection is the group as it is when the requeue runs: the newcomers too.
      expect(await deadLetters.requeue({ group: group.group })).toBe(2);
      expect(Object.values(await statusOf()).every((s) => s === 'pending')).toBe(true);
    });
  });
}
