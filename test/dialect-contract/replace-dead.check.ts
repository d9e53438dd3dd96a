import { OutboxMessage } from '../../src';
import { OutboxAttempt } from '../../src/schema/outbox-attempt.entity';
import type { DialectSubject } from './contract-subject';

/** The promise of `replaceDead()` (edit-and-requeue), as a contract check of its own (see dialect-contract.ts). */
export const REPLACE_DEAD_CHECK = {
  name: "replaceDead() makes the copy in the dead row's place and keeps the original as replaced with its history; a row no longer dead changes nothing",
  async run(s: DialectSubject): Promise<void> {
    const repo = s.dataSource.getRepository(OutboxMessage);
    await s.dataSource.createQueryBuilder().delete().from(OutboxMessage).execute();
    const suffix = Math.random().toString(36).slice(2, 8);
    const [dead, pending, copy] = ['dead', 'pending', 'copy'].map((l) => `${l}-${suffix}`);
    await s.dialect.insert(s.dataSource.manager, s.table, [
      { messageId: dead, pattern: 'E', payload: '{"v":1}', headers: '{"h":"1"}', key: 'k' },
      { messageId: pending, pattern: 'E', payload: '{}', headers: null, key: 'k' },
    ]);
    const before = (await repo.findOneByOrFail({ messageId: dead }))!;
    await repo.update(
      { messageId: dead },
      { status: 'dead', attempts: 4, deadAt: new Date(5000), lastError: 'refused', availableAt: new Date(4000) },
    );
    await s.dataSource.getRepository(OutboxAttempt).insert({
      messageSeq: before.seq,
      attempt: 4,
      failedAt: 4500,
      counted: true,
      error: 'refused',
      owner: 'o',
      publisher: 'p',
    } as never);
    const replacement = (seqs: string[], id: string) => ({
      messageId: dead,
      seqs,
      newMessageId: id,
      payload: '{"v":2}',
      headers: '{"h":"2"}',
      audit: (now: number) => JSON.stringify({ now }),
    });
    const replaced = await s.dataSource.transaction((m) =>
      s.dialect.replaceDead(m, s.table, replacement([String(before.seq)], copy)),
    );
    expect(replaced).toEqual([{ seq: String(before.seq), replacedSeq: expect.any(String), destination: '' }]);
    const rows = await repo.find({ order: { seq: 'ASC' } });
    expect(rows.map((r) => [r.messageId, r.status])).toEqual([
      [copy, 'pending'],
      [pending, 'pending'],
      [dead, 'replaced'],
    ]);
    // The copy holds the dead row's seq (so its place in the key), due now with no attempt; the original is intact.
    expect(String(rows[0].seq)).toBe(String(before.seq));
    expect(rows[0]).toMatchObject({ payload: '{"v":2}', headers: '{"h":"2"}', attempts: 0 });
    expect(rows[0].lastError).toBeNull();
    expect(rows[2]).toMatchObject({
      payload: '{"v":1}',
      headers: '{"h":"1"}',
      attempts: 4,
      lastError: 'refused',
      key: 'k',
    });
    expect(rows[2].deadAt?.getTime()).toBe(5000);
    expect(rows[2].createdAt.getTime()).toBe(before.createdAt.getTime());
    expect(Math.abs(JSON.parse(rows[2].editAudit!).now - Date.now())).toBeLessThan(60_000);
    const history = await s.dialect.listAttempts(s.dataSource.manager, s.table, String(rows[2].seq));
    expect(history.map((a) => a.error)).toEqual(['refused']);
    expect(await s.dialect.listAttempts(s.dataSource.manager, s.table, String(before.seq))).toEqual([]);
    // Again on the same row (now the pending copy) or on a pending row: nothing.
    for (const seqs of [[String(before.seq)], [String(rows[1].seq)]]) {
      expect(
        await s.dataSource.transaction((m) => s.dialect.replaceDead(m, s.table, replacement(seqs, `x-${suffix}`))),
      ).toEqual([]);
    }
    expect(await repo.count()).toBe(3);
  },
};
